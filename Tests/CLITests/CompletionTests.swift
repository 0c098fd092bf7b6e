import Foundation
import SharedTestSupport
import XCTest

/// The bash completion (completions/bash/encfs-tools) sourced in a real
/// bash with the built tools first on PATH: it offers each tool's own
/// options (read from its --help, so every offered option is one the tool
/// accepts), values as file names where the help says FILE, encfs-inspect's
/// commands, and -o spellings for encfs-mount.
final class CompletionTests: ToolTestCase {
    private var script: String { "\(Tools.repositoryRoot)/completions/bash/encfs-tools" }

    /// The completions bash offers for `words` (the last one being completed).
    private func complete(_ words: [String], in directory: String? = nil) throws -> [String] {
        let program = """
        source "$1"; shift
        [ -n "$ENCFS_TEST_CWD" ] && cd "$ENCFS_TEST_CWD"
        COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        _encfs_complete
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let bin = Tools.binaryDirectory ?? ""
        let result = try run("/bin/bash", ["--norc", "-c", program, "bash", script] + words,
                             environment: ["PATH": "\(bin):/usr/bin:/bin", "ENCFS_TEST_CWD": directory ?? ""])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result.output.split(separator: "\n").map(String.init)
    }

    /// What the script takes as the value placeholder of `option` (empty for a flag).
    private func placeholder(_ tool: String, _ option: String) throws -> String {
        let bin = Tools.binaryDirectory ?? ""
        let result = try run("/bin/bash", ["--norc", "-c", "source \"$1\"; _encfs_placeholder \"$2\" \"$3\"", "bash", script, tool, option],
                             environment: ["PATH": "\(bin):/usr/bin:/bin"])
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testOptions_AreTheToolsOwnAndAccepted() throws {
        for tool in ["encfs-pack", "encfs-mount", "encfs-inspect", "encfs-keygen", "encfs-rekey"] {
            let offered = try complete([tool, "-"])
            XCTAssertTrue(offered.contains("--help") && offered.contains("--version"), "\(tool): \(offered)")
            for option in offered {
                // A valued option gets a value; then --help must parse: an
                // option the tool does not know would be a usage error.
                let valued = try !placeholder(tool, option).isEmpty
                let arguments = option == "--version" ? [option] : [option] + (valued ? ["x"] : []) + ["--help"]
                let result = try run("\(Tools.binaryDirectory ?? "")/\(tool)", arguments)
                XCTAssertEqual(result.status, 0, "\(tool) offers \(option): \(result.summary)")
            }
        }
        XCTAssertFalse(try complete(["encfs-keygen", "--"]).contains("--identity"), "an option only mentioned in prose")
        XCTAssertEqual(try complete(["encfs-mount", "--key-f"]), ["--key-file"])
        XCTAssertTrue(try complete(["encfs-mount", "-"]).contains("-o"))
    }

    func testValuesAndOperands_CompleteFileNames() throws {
        _ = try scratch.write("assets.encfs", [])
        _ = try scratch.write("assets.key", [])
        _ = try scratch.makeDirectory("assets-dir")
        XCTAssertEqual(try complete(["encfs-mount", "--key-file", "assets.k"], in: scratch.path), ["assets.key"])
        XCTAssertEqual(try complete(["encfs-mount", "assets.e"], in: scratch.path), ["assets.encfs"])
        XCTAssertEqual(Set(try complete(["encfs-pack", "asse"], in: scratch.path)), ["assets.encfs", "assets.key", "assets-dir"])
        // A number takes no file names.
        XCTAssertEqual(try complete(["encfs-mount", "--threads", ""], in: scratch.path), [])
        // A list of choices completes to its choices.
        XCTAssertEqual(try complete(["encfs-mount", "b", "m", "--prefetch", "i"], in: scratch.path), ["index"])
    }

    func testInspectCommands_AndMountOptionSpellings() throws {
        XCTAssertEqual(try complete(["encfs-inspect", ""]), ["info", "ls", "cat", "verify", "rekey"])
        XCTAssertEqual(try complete(["encfs-inspect", "--json", "ve"]), ["verify"])
        _ = try scratch.write("b.encfs", [])
        XCTAssertEqual(try complete(["encfs-inspect", "verify", "b."], in: scratch.path), ["b.encfs"])
        let spellings = try complete(["encfs-mount", "b", "m", "-o", ""])
        for expected in ["keyfile=", "passfile=", "identity", "index_cache", "auto_unmount", "allow_other"] {
            XCTAssertTrue(spellings.contains(expected), "\(expected) not in \(spellings)")
        }
    }
}
