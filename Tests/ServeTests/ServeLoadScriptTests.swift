import Foundation
import SharedTestSupport
import XCTest

/// Scripts/serve-load.sh in its short mode (5 s): wrk on a small and a
/// large file at once, sampled responses compared byte for byte, slowloris
/// clients meanwhile, no error and a bounded RSS. The 60 s run is the
/// script's default, run by hand (docs/PERFORMANCE.md).
final class ServeLoadScriptTests: ServeTestCase {
    func testServeLoad_ShortMode_Passes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/wrk") else { throw XCTSkip("wrk is not installed") }
        var environment = ProcessInfo.processInfo.environment
        environment["ENCFS_BIN_DIR"] = Self.binDirectory
        let result = try execute(Tools.repositoryRoot + "/Scripts/serve-load.sh", ["5"], environment: environment, timeout: 300)
        XCTAssertEqual(result.status, 0, result.text + result.errorText)
        XCTAssertTrue(result.text.hasSuffix("PASS\n"), result.text)
    }
}
