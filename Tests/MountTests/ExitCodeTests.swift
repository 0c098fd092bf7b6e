import Foundation
import SharedTestSupport
import XCTest
import EncFSService

/// docs/CLI.md's exit codes are a contract: the table lists exactly the
/// codes each tool uses, and a representative case of each row returns it.
final class ExitCodeTests: ToolTestCase {
    /// `command → codes` from the table in docs/CLI.md.
    private func documentedCodes() throws -> [String: Set<Int32>] {
        let text = try String(contentsOfFile: "\(Tools.repositoryRoot)/docs/CLI.md", encoding: .utf8)
        var codes: [String: Set<Int32>] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| encfs-") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, let code = Int32(cells[1]) else { continue }
            codes[cells[0], default: []].insert(code)
        }
        return codes
    }

    func testDocumentedCodes_CoverEveryTool() throws {
        let codes = try documentedCodes()
        XCTAssertTrue(text(contains: "treat any other code as failure"))
        guard let dir = Tools.binaryDirectory else { throw SubprocessError("no binaries") }
        let tools = try BuiltBinaries.shippedTools(in: dir)
        XCTAssertTrue(tools.contains("encfs-pack") && tools.contains("encfs-mount"), "\(tools)")
        for tool in tools {
            XCTAssertEqual(codes[tool], [0, 1, 2], "\(tool) in docs/CLI.md")
            XCTAssertEqual(try run("\(dir)/\(tool)", ["--help"]).status, 0, tool)
            XCTAssertEqual(try run("\(dir)/\(tool)", ["--version"]).status, 0, tool)
            XCTAssertEqual(try run("\(dir)/\(tool)", ["--no-such-option"]).status, 2, tool)
        }
    }

    private func text(contains phrase: String) -> Bool {
        ((try? String(contentsOfFile: "\(Tools.repositoryRoot)/docs/CLI.md", encoding: .utf8)) ?? "").lowercased().contains(phrase)
    }

    func testRepresentativeCases_ReturnTheDocumentedCode() throws {
        let source = try scratch.makeDirectory("src")
        _ = try scratch.write("src/f", Array("data".utf8))
        let key = try makeKeyFile()
        let wrong = try makeKeyFile("wrong")
        let bundle = scratch.url("b.encfs")
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let cases: [(tool: String, arguments: [String], code: Int32)] = [
            (try Tools.pack(), [source, bundle, "--key-file", key, "--quiet"], 0),
            (try Tools.pack(), [scratch.url("missing"), scratch.url("x.encfs"), "--key-file", key], 1),
            (try Tools.pack(), [source], 2),
            (try Tools.inspect(), ["verify", bundle, "--key-file", key], 0),
            (try Tools.inspect(), ["verify", bundle, "--key-file", wrong], 1),
            (try Tools.inspect(), ["frobnicate", bundle], 2),
            (try Tools.mount(), [bundle, mnt, "--key-file", wrong], 1),
            (try Tools.mount(), [bundle, mnt, "-o", "passphrase=x"], 2),
            (try Tools.mount(), [bundle, mnt, "--key-file", key], 0),
            (try Tools.ctl(), [mnt, "status"], 0),
            (try Tools.ctl(), [mnt, "lock"], 1),
            (try Tools.ctl(), [mnt, "frobnicate"], 2),
            (try Tools.keygen(), ["--symmetric", "-o", key], 1),
            (try Tools.keygen(), ["--symmetric", "-o", scratch.url("new.key")], 0),
            (try Tools.keygen(), ["--symmetric", "--sign"], 2),
            // The key encfs-keygen just wrote, added as a second slot.
            (try Tools.rekey(), [bundle, "--key-file", key, "--add-key-file", scratch.url("new.key")], 0),
            (try Tools.rekey(), [bundle, "--key-file", wrong, "--add-key-file", scratch.url("new.key")], 1),
            (try Tools.rekey(), [bundle, "--key-file", key], 2),
            (try Tools.binary("encfs-serve"), [bundle, "--key-file", wrong], 1),
            (try Tools.binary("encfs-serve"), [bundle, "--key-file", key, "--no-token"], 2),
        ]
        let documented = try documentedCodes()
        for (tool, arguments, code) in cases {
            let name = URL(fileURLWithPath: tool).lastPathComponent
            XCTAssertTrue(documented[name]?.contains(code) ?? false, "\(name) \(code) not in docs/CLI.md")
            let result = try run(tool, arguments, timeout: 60)
            XCTAssertEqual(result.status, code, result.summary)
        }
        XCTAssertTrue(MountTable.isServing(mnt))
    }

    /// Errors whose meaning crosses a process boundary as an `ErrorCode`
    /// (the daemon's verdict pipe, a control reply) or was once recognized
    /// by its message: each shows its message, the hint of its code and its
    /// exit status, through the real binaries. The unsigned bundle is
    /// refused by the background daemon (it checks the origin), whose
    /// verdict used to lose the hint.
    func testCodedErrors_ShowMessageHintAndExitCode() throws {
        let source = try scratch.makeDirectory("src")
        _ = try scratch.write("src/f", Array("data".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try run(try Tools.pack(), [source, bundle, "--key-file", key, "--quiet"]))
        let signing = scratch.url("sign.key")
        assertSuccess(try run(try Tools.keygen(), ["--sign", "-o", signing]))
        let mnt = try scratch.makeDirectory("mnt")
        let refused = try scratch.makeDirectory("refused")
        let plain = try scratch.makeDirectory("plain")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        addTeardownBlock { MountedBundle.unmount(mountpoint: refused, foreground: nil) }
        assertSuccess(try run(try Tools.mount(), [bundle, mnt, "--key-file", key], timeout: 60))
        let missing = scratch.url("missing")
        let unsigned = ["encfs-mount: error: bundle is not signed (\(bundle))",
                        "hint: a bundle is signed by encfs-pack --sign-key (or encfs-inspect rekey --sign-key); "
                            + "without a signature anyone with a recipient's public key can make a bundle that opens"]
        let cases: [(tool: String, arguments: [String], lines: [String], code: Int32)] = [
            (try Tools.pack(), [missing, scratch.url("x.encfs"), "--key-file", key],
             ["encfs-pack: error: cannot read source directory: No such file or directory (\(missing))"], 1),
            (try Tools.mount(), [bundle, refused, "--key-file", key, "--verify-key", signing + ".pub"], unsigned, 1),
            (try Tools.mount(), [bundle, refused, "--key-file", key, "--verify-key", signing + ".pub", "-f"], unsigned, 1),
            (try Tools.ctl(), [mnt, "lock"],
             ["encfs-ctl: error: the mount's protection is until-unmount: lock it with --force, or mount with --protection complete",
              "hint: encfs-ctl MOUNTPOINT lock --force"], 1),
            (try Tools.ctl(), [plain, "status"],
             ["encfs-ctl: error: no control socket for this mountpoint (\(plain))",
              "hint: is it mounted with encfs-mount by this user? (root finds root's mounts in /run/encfs)"], 1),
        ]
        for (tool, arguments, lines, code) in cases {
            let result = try run(tool, arguments, timeout: 60)
            XCTAssertEqual(result.errorLines, lines, result.summary)
            XCTAssertEqual(result.status, code, result.summary)
        }
        XCTAssertFalse(MountTable.isMounted(refused))
        XCTAssertTrue(MountTable.isServing(mnt))
    }
}
