import SharedTestSupport
import XCTest

/// The short mode of `Scripts/load.sh`: one mount under 16 verifying fio
/// jobs and 64 small-file readers for 10 s, with zero errors, zero
/// mismatches, a bounded daemon RSS, and a mount that still serves and
/// unmounts cleanly afterwards. The long run (`Scripts/load.sh`, 60 s) is
/// recorded in docs/SECURITY.md.
final class LoadTests: ToolTestCase {
    func testLoad_ShortRun_NoErrorsNoMismatchesBoundedMemory() throws {
        guard let binaries = Tools.binaryDirectory else { throw SubprocessError("encfs binaries not found: build with `swift build -c release`") }
        let script = "\(Tools.repositoryRoot)/Scripts/load.sh"
        let result = try run(script, ["10"], environment: ["ENCFS_BIN_DIR": binaries, "ENCFS_LOAD_DIR": scratch.path],
                             timeout: 300)
        XCTAssertEqual(result.status, 0, result.output + result.errorOutput)
        XCTAssertTrue(result.output.contains("load: ok"), result.output)
        for line in result.output.split(separator: "\n") { report(String(line)) }
    }
}
