import EncFSCore
import XCTest

/// Every command accepts `--version`: one line `TOOL VERSION` on stdout, exit
/// 0, nothing on stderr, the same version for all four, and `--help` says so.
final class VersionTests: XCTestCase {
    private let tools: [(name: String, path: () throws -> String)] = [
        ("encfs-pack", Tools.pack), ("encfs-mount", Tools.mount),
        ("encfs-inspect", Tools.inspect), ("encfs-keygen", Tools.keygen),
    ]

    func testVersion_PrintsToolAndVersion() throws {
        for tool in tools {
            let result = try Subprocess.run(try tool.path(), ["--version"])
            XCTAssertEqual(result.status, 0, result.summary)
            XCTAssertEqual(result.output, "\(tool.name) \(EncFSVersion.string)\n", result.summary)
            XCTAssertEqual(result.stderr, [], result.summary)
        }
        XCTAssertNotNil(EncFSVersion.string.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+/), EncFSVersion.string)
    }

    /// Like `--help`, `--version` needs no other argument, and options still
    /// parse: an unknown one is a usage error even next to `--version`.
    func testVersion_OptionRules() throws {
        for tool in tools {
            let after = try Subprocess.run(try tool.path(), ["--no-such-option", "--version"])
            XCTAssertEqual(after.status, 2, after.summary)
            let valued = try Subprocess.run(try tool.path(), ["--version=1"])
            XCTAssertEqual(valued.status, 2, valued.summary)
        }
    }

    func testHelp_DocumentsVersion() throws {
        for tool in tools {
            let result = try Subprocess.run(try tool.path(), ["--help"])
            XCTAssertEqual(result.status, 0, result.summary)
            XCTAssertTrue(result.output.contains("--version"), "\(tool.name) --help: \(result.output)")
        }
    }
}
