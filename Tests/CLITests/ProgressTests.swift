import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Progress lines on stderr: drawn on a terminal (a pty here), never into
/// a pipe unless `--progress` forces it, never with `--quiet`; for
/// encfs-pack, encfs-inspect verify and rekey.
final class ProgressTests: ToolTestCase {
    /// argv: `pty` or `pipe`, then the command. Runs it with stderr on a
    /// fresh pty (or a pipe) and stdout on a pipe; prints the exit status,
    /// then stderr and stdout as hex, one per line.
    static let runner = #"""
import os, pty, subprocess, sys
mode, command = sys.argv[1], sys.argv[2:]
if mode == "pty":
    master, slave = pty.openpty()
    p = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO once the child has closed its side
            break
        if not data:
            break
        err += data
    out = p.stdout.read()
    p.wait()
else:
    p = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.stdout, p.stderr
print(p.returncode)
print(err.hex())
print(out.hex())
"""#

    private struct Output {
        let status: Int32
        let stderr: String
        let stdout: String
    }

    private func run(_ mode: String, _ command: [String]) throws -> Output {
        let result = try python(Self.runner, [mode] + command, timeout: 120)
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard result.status == 0, lines.count >= 3, let status = Int32(lines[0]) else { throw SubprocessError(result.summary) }
        func decode(_ hex: String) -> String {
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex),
                  let byte = UInt8(hex[index..<next], radix: 16) {
                bytes.append(byte)
                index = next
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        return Output(status: status, stderr: decode(lines[1]), stdout: decode(lines[2]))
    }

    private var source = ""
    private var key = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        for (name, size) in [("a", 100_000), ("b", 5), ("c", 70_000)] {
            _ = try scratch.write("src/\(name)", [UInt8](repeating: 7, count: size))
        }
        key = try makeKeyFile()
    }

    func testPack_DrawsOnATerminalOnly() throws {
        let onTerminal = try run("pty", [try Tools.pack(), source, scratch.url("t.encfs"), "--key-file", key])
        XCTAssertEqual(onTerminal.status, 0, onTerminal.stderr)
        // The last frame has the final counts, then a newline (the pty shows it as \r\n).
        XCTAssertTrue(onTerminal.stderr.contains("\rencfs-pack: 3/3 files, 166.0 KiB of 166.0 KiB (100%)"), onTerminal.stderr)
        XCTAssertTrue(onTerminal.stderr.hasSuffix("\u{1b}[K\r\n"), onTerminal.stderr)
        XCTAssertTrue(onTerminal.stdout.hasPrefix("encfs-pack: packed 3 files"), onTerminal.stdout)

        let piped = try run("pipe", [try Tools.pack(), source, scratch.url("p.encfs"), "--key-file", key])
        XCTAssertEqual(piped.status, 0)
        XCTAssertEqual(piped.stderr, "")
        XCTAssertTrue(piped.stdout.hasPrefix("encfs-pack: packed 3 files"), piped.stdout)
    }

    func testPack_ProgressForcesQuietSilences() throws {
        let forced = try run("pipe", [try Tools.pack(), source, scratch.url("f.encfs"), "--key-file", key, "--progress"])
        XCTAssertEqual(forced.status, 0)
        XCTAssertTrue(forced.stderr.contains("\rencfs-pack: 3/3 files"), forced.stderr)
        let quiet = try run("pty", [try Tools.pack(), source, scratch.url("q.encfs"), "--key-file", key, "--quiet"])
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stderr, "")
        XCTAssertEqual(quiet.stdout, "")
    }

    func testPack_WarningsStartOnALineOfTheirOwn() throws {
        _ = try scratch.write("src/fifo-stand-in", [])
        XCTAssertEqual(symlink("/etc/hostname", scratch.url("src/outside")), 0)
        let output = try run("pty", [try Tools.pack(), source, scratch.url("w.encfs"), "--key-file", key])
        XCTAssertEqual(output.status, 0)
        // The warning line begins after an erased line, never glued to a frame.
        XCTAssertTrue(output.stderr.contains("\r\u{1b}[Kencfs-pack: warning: symlink points outside the bundle"), output.stderr)
    }

    func testVerifyAndRekey_DrawOnATerminal() throws {
        let bundle = scratch.url("v.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let verify = try run("pty", [try Tools.inspect(), "verify", bundle, "--key-file", key])
        XCTAssertEqual(verify.status, 0)
        XCTAssertTrue(verify.stderr.contains("\rencfs-inspect: 3/3 files, 166.0 KiB of 166.0 KiB (100%)"), verify.stderr)
        XCTAssertTrue(verify.stdout.contains("verified 3 files"), verify.stdout)

        let piped = try run("pipe", [try Tools.inspect(), "verify", bundle, "--key-file", key])
        XCTAssertEqual(piped.stderr, "")
        let quiet = try run("pty", [try Tools.inspect(), "verify", bundle, "--key-file", key, "--quiet"])
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stderr + quiet.stdout, "")

        // Removing a slot re-encrypts every chunk: that is what progress shows.
        let second = try makeKeyFile("second")
        try check(try Tools.inspect(), ["rekey", bundle, "--key-file", key, "--add-key-file", second])
        let fingerprint = try XCTUnwrap(try run(try Tools.inspect(), ["info", bundle, "--json"]).output
            .firstMatch(of: /"fingerprint": "([0-9a-f]+)"/)?.1)
        let rekey = try run("pty", [try Tools.inspect(), "rekey", bundle, "--key-file", second, "--remove", String(fingerprint)])
        XCTAssertEqual(rekey.status, 0, rekey.stderr)
        XCTAssertTrue(rekey.stderr.contains("\rencfs-inspect: 3/3 files, 166.0 KiB of 166.0 KiB (100%)"), rekey.stderr)
        XCTAssertTrue(rekey.stdout.hasPrefix("rekeyed: 0 slots added, 1 removed"), rekey.stdout)
    }
}
