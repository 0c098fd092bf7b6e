import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Names reach people's terminals and logs (security review, finding 5): a
/// file named "evil\n\e[31mname" forged a second listing line and recoloured
/// the terminal through `encfs-inspect ls`. Every human-readable output now
/// shows control bytes and bytes that are not UTF-8 as `\xNN` (a backslash
/// as `\\`): `ls`, `verify` lists, pack warnings, error lines.
final class OutputEscapingTests: ToolTestCase {
    /// The raw name: a newline, then ESC [31m.
    static let evilName: [UInt8] = Array("evil\n\u{1B}[31mname".utf8)
    /// How every tool shows it.
    static let evilShown = #"evil\x0a\x1b[31mname"#

    private var source = ""
    private var key = ""
    private var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/plain", Array("plain\n".utf8))
        try scratch.makeDirectory("src/dir")
        try write(Self.evilName, contents: Array(repeating: 0x41, count: 5000))
        try write(Array("dir/".utf8) + Self.evilName, contents: Array("inner\n".utf8))
        try write(Array("bad-".utf8) + [0xFF, 0x80] + Array("-utf8".utf8), contents: Array("x".utf8))
        guard symlink("plain\n\u{1B}[0m", "\(source)/link") == 0 else { throw SubprocessError("symlink") }
        key = try makeKeyFile()
        bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "4K"])
    }

    /// Creates `src/<name>` from raw name bytes (Foundation would decode them).
    private func write(_ name: [UInt8], contents: [UInt8]) throws {
        let path = Array(source.utf8) + [UInt8(ascii: "/")] + name
        let fd = path.withUnsafeBufferPointer { b in
            (Array(b) + [0]).withUnsafeBufferPointer { p in
                p.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
            }
        }
        guard fd >= 0 else { throw SubprocessError("create \(String(decoding: name, as: UTF8.self)): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard contents.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == contents.count else {
            throw SubprocessError("write")
        }
    }

    private func inspect(_ arguments: [String]) throws -> ProcessResult {
        try run(try Tools.inspect(), arguments)
    }

    /// One line per entry, in name order, no raw control byte anywhere.
    func testLs_ControlBytesInNames_OneLinePerEntryShownAsText() throws {
        let ls = try inspect(["ls", bundle, "--key-file", key])
        XCTAssertEqual(ls.status, 0, ls.summary)
        XCTAssertEqual(ls.output, #"bad-\xff\x80-utf8"# + "\ndir\n" + Self.evilShown + "\nlink\nplain\n")
        let long = try inspect(["ls", "-l", "-R", bundle, "--key-file", key])
        XCTAssertEqual(long.status, 0, long.summary)
        let lines = long.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // ".:", 5 entries, "", "./dir:", 1 entry, and the final newline.
        XCTAssertEqual(lines.count, 10, long.output)
        XCTAssertTrue(lines.contains { $0.hasPrefix("lrwxrwxrwx") && $0.hasSuffix(#" link -> plain\x0a\x1b[0m"#) }, long.output)
        XCTAssertTrue(lines.contains { $0.hasPrefix("-rw-r--r--         5000 ") && $0.hasSuffix(" " + Self.evilShown) }, long.output)
        XCTAssertTrue(lines.contains { $0.hasPrefix("-rw-r--r--            6 ") && $0.hasSuffix(" " + Self.evilShown) }, long.output)
        XCTAssertTrue(lines.contains("./dir:"), long.output)
        // Nothing but printable ASCII and newlines: every name here is
        // either ASCII or escaped.
        for output in [ls.stdout, long.stdout] {
            XCTAssertTrue(output.allSatisfy { $0 == 0x0A || (0x20..<0x7F).contains($0) }, "a raw control or non-ASCII byte reached the output")
        }
    }

    /// `verify` names a damaged file with its escaped path.
    func testVerify_DamagedFileWithControlBytes_ListedEscaped() throws {
        let offset = try BundleSurgery.offset(ofChunk: 1, byte: 3, ofFile: String(decoding: Self.evilName, as: UTF8.self),
                                              in: bundle, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: bundle)
        let verify = try inspect(["verify", bundle, "--key-file", key])
        XCTAssertEqual(verify.status, 1, verify.summary)
        XCTAssertEqual(verify.output, "damaged: \(Self.evilShown) (chunks 1 of 2)\n"
                       + "verified 4 files, 5 chunks: 1 damaged chunks in 1 files\n")
    }

    /// Error lines and pack warnings show paths escaped, on one line.
    func testMessages_PathsWithControlBytes_OneLineEscaped() throws {
        let cat = try inspect(["cat", bundle, "missing\n\u{1B}[2J", "--key-file", key])
        XCTAssertEqual(cat.status, 1, cat.summary)
        XCTAssertEqual(cat.errorLines, [#"encfs-inspect: error: no such file or directory in the bundle (missing\x0a\x1b[2J)"#])
        // A FIFO (skipped with a warning) whose name holds a newline and ESC:
        // one warning line.
        guard mkfifo("\(source)/fifo\n\u{1B}[1Aname", 0o644) == 0 else { throw SubprocessError("mkfifo") }
        let packed = try pack(source, scratch.url("warned.encfs"), ["--key-file", key])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(packed.errorLines, ["encfs-pack: warning: skipping fifo, only regular files, directories and symlinks are packed ("
                                           + source + #"/fifo\x0a\x1b[1Aname)"#])
        // --quiet: errors only, so the same pack prints nothing at all.
        let quiet = try pack(source, scratch.url("quiet.encfs"), ["--key-file", key, "--quiet"])
        XCTAssertEqual(quiet.status, 0, quiet.summary)
        XCTAssertEqual(quiet.errorLines, [])
        XCTAssertTrue(quiet.output.isEmpty, quiet.summary)
    }
}
