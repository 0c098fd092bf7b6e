import Foundation
import SharedTestSupport
import XCTest

/// Every tool has a man page (docs/man/TOOL.1, rendered from TOOL.1.scd by
/// Scripts/render-man.sh) that man renders without warnings and that
/// names every option the tool's `--help` lists. Tools and options are
/// discovered, not listed here: a new executable or option fails this
/// test until its page says something about it.
final class ManPageTests: ToolTestCase {
    private var manDirectory: String { "\(Tools.repositoryRoot)/docs/man" }

    /// The encfs-* executables of the build (test tooling excluded).
    private func tools() throws -> [String] {
        guard let dir = Tools.binaryDirectory else { throw SubprocessError("no binaries") }
        return try BuiltBinaries.shippedTools(in: dir)
    }

    /// Long options anywhere in `--help`, and short ones where a line of
    /// the option list starts with one (`  -f, --foreground`).
    static func options(inHelp help: String) -> Set<String> {
        var found = Set(help.matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) })
        for line in help.split(separator: "\n") {
            if let short = line.firstMatch(of: /^\s+(-[a-zA-Z])[ ,]/) { found.insert(String(short.output.1)) }
        }
        return found
    }

    /// The page as text: rendered wide (so no option is hyphenated across
    /// lines), overstrike removed.
    private func renderedText(_ page: String) throws -> String {
        let result = try run("/bin/sh", ["-c", "MANWIDTH=4000 man -P cat -l \"$1\"", "sh", page])
        assertSuccess(result)
        var out: [UInt8] = []
        for byte in result.stdout {
            if byte == 0x08 { out.removeLast(out.isEmpty ? 0 : 1) } else { out.append(byte) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    func testEveryToolHasAPageNamingEachOption() throws {
        let tools = try tools()
        XCTAssertTrue(tools.contains("encfs-mount"), "\(tools)")
        for tool in tools {
            let page = "\(manDirectory)/\(tool).1"
            guard access(page, R_OK) == 0 else {
                XCTFail("\(tool) has no man page \(page) (write docs/man/\(tool).1.scd, run Scripts/render-man.sh)")
                continue
            }
            let help = try run("\(Tools.binaryDirectory ?? "")/\(tool)", ["--help"]).output
            let options = Self.options(inHelp: help)
            XCTAssertTrue(options.contains("--version") && options.contains("--help"), "\(tool): \(options)")
            let text = try renderedText(page)
            for option in options.sorted() {
                XCTAssertTrue(text.contains(option), "\(tool)(1) does not mention \(option), which --help lists")
            }
        }
    }

    func testPagesRenderWithoutWarnings() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: manDirectory).filter { $0.hasSuffix(".1") || $0.hasSuffix(".5") }
        XCTAssertTrue(pages.contains("encfs.5"), "\(pages)")
        for page in pages {
            let result = try run("/bin/sh", ["-c", "MANWIDTH=80 man --warnings -P cat -l \"$1\"", "sh", "\(manDirectory)/\(page)"])
            assertSuccess(result)
            XCTAssertEqual(result.errorOutput, "", page)
            XCTAssertTrue(result.output.contains("NAME"), page)
        }
    }

    func testCommittedPagesMatchTheirSources() throws {
        let result = try run("\(Tools.repositoryRoot)/Scripts/render-man.sh", ["--check"])
        assertSuccess(result)
    }

    func testOptionDiscovery_FindsLongAndListedShortOptions() {
        let help = "usage: x [-o FILE]\n  -f, --foreground   text --log-file\n  -o OPTIONS   see fusermount3 -u\n"
        XCTAssertEqual(Self.options(inHelp: help), ["--foreground", "--log-file", "-f", "-o"])
    }
}
