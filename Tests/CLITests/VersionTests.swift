import EncFSCore
import SharedTestSupport
import XCTest

/// Every command accepts `--version`: `TOOL VERSION` on stdout, then the
/// git commit, the OpenSSL and libfuse versions in use; exit 0, nothing on
/// stderr, the same version for all of them, and `--help` says so.
final class VersionTests: XCTestCase {
    private let tools: [(name: String, path: () throws -> String)] = [
        ("encfs-pack", Tools.pack), ("encfs-mount", Tools.mount),
        ("encfs-inspect", Tools.inspect), ("encfs-keygen", Tools.keygen), ("encfs-ctl", Tools.ctl),
        ("encfs-rekey", Tools.rekey),
    ]

    func testVersion_PrintsToolAndVersion() throws {
        let openssl = try Subprocess.run("openssl", ["version"]).output
        let fusermount = try Subprocess.run(Tools.fusermount, ["--version"]).output
        for tool in tools {
            let result = try Subprocess.run(try tool.path(), ["--version"])
            XCTAssertEqual(result.status, 0, result.summary)
            let lines = result.output.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.count, 4, result.output)
            XCTAssertEqual(lines.first, "\(tool.name) \(EncFSVersion.string)", result.summary)
            // A commit of this checkout (possibly with local changes): HEAD
            // when built, or one before it if commits came since the build.
            let commit = try XCTUnwrap(lines.dropFirst().first?.wholeMatch(of: /commit: ([0-9a-f]{12})(-modified)?/)?.1)
            let ancestor = try Subprocess.run("git", ["-C", Tools.repositoryRoot, "merge-base", "--is-ancestor", String(commit), "HEAD"])
            XCTAssertEqual(ancestor.status, 0, "\(commit) is not a commit of this checkout: \(ancestor.summary)")
            // The libraries in use: the same as the system's openssl and fusermount3 report.
            let library = try XCTUnwrap(lines.dropFirst(2).first?.wholeMatch(of: /openssl: (OpenSSL [0-9.]+).*/)?.1)
            XCTAssertTrue(openssl.contains(library), "\(library) vs \(openssl)")
            let fuse = try XCTUnwrap(lines.last?.wholeMatch(of: /libfuse: ([0-9]+\.[0-9]+\.[0-9]+)/)?.1)
            XCTAssertTrue(fusermount.contains(" \(fuse)"), "\(fuse) vs \(fusermount)")
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

    /// The commit comes from Scripts/build-info.sh: "unknown" for a tree
    /// without git (a release tarball), ENCFS_GIT_COMMIT when set, and the
    /// file is left alone when nothing changed.
    func testBuildInfoScript_FallsBackToUnknown() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let script = "\(Tools.repositoryRoot)/Scripts/build-info.sh"
        let tarball = try scratch.makeDirectory("tarball")
        XCTAssertEqual(try Subprocess.run("/bin/sh", [script, tarball, scratch.url("out")]).status, 0)
        let generated = try String(contentsOfFile: scratch.url("out/BuildInfo.swift"), encoding: .utf8)
        XCTAssertTrue(generated.contains("static let commit = \"unknown\""), generated)
        let named = try Subprocess.run("/bin/sh", [script, tarball, scratch.url("named")], environment: ["ENCFS_GIT_COMMIT": "0123abcd"])
        XCTAssertEqual(named.status, 0)
        XCTAssertTrue(try String(contentsOfFile: scratch.url("named/BuildInfo.swift"), encoding: .utf8).contains("\"0123abcd\""))
        let hostile = try Subprocess.run("/bin/sh", [script, tarball, scratch.url("hostile")], environment: ["ENCFS_GIT_COMMIT": "x\"; bad"])
        XCTAssertEqual(hostile.status, 0)
        XCTAssertTrue(try String(contentsOfFile: scratch.url("hostile/BuildInfo.swift"), encoding: .utf8).contains("\"unknown\""))
    }
}
