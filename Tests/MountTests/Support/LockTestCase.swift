import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Base of the lock tests: a bundle with a small and a larger file, and
/// helpers that drive `encfs-ctl` and try the mount from a separate
/// Python process (never from the process that serves it).
class LockTestCase: ToolTestCase {
    var key = ""
    var bundle = ""
    var source = ""
    /// 300,000 bytes: several chunks, more than one read.
    static let largeSize = 300_000

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        _ = try scratch.makeDirectory("src/docs")
        try scratch.write("src/docs/large", (0..<Self.largeSize).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        try scratch.write("src/small", Array("small file\n".utf8))
        key = try makeKeyFile()
        bundle = scratch.url("lock.encfs")
        try packOrThrow(source, bundle, keyFile: key)
    }

    /// Runs `encfs-ctl MOUNTPOINT arguments…`.
    @discardableResult
    func ctl(_ mounted: MountedBundle, _ arguments: [String], environment: [String: String?] = [:]) throws -> ProcessResult {
        try run(try Tools.ctl(), [mounted.mountpoint] + arguments, environment: environment)
    }

    /// `encfs-ctl MOUNTPOINT status --json`, parsed by Python's json module
    /// and printed back as `key=value` lines.
    func status(_ mounted: MountedBundle) throws -> [String: String] {
        let result = try python("""
            import json, subprocess, sys
            out = subprocess.run([sys.argv[1], sys.argv[2], 'status', '--json'], capture_output=True, check=True).stdout
            for k, v in json.loads(out).items(): print(f'{k}={json.dumps(v)}')
            """, [try Tools.ctl(), mounted.mountpoint])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        var fields: [String: String] = [:]
        for line in result.output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// What opening and reading `relative` in the mount gives, from a
    /// separate process: `ok SIZE` or the errno's name (`ENOKEY`).
    func tryRead(_ mounted: MountedBundle, _ relative: String) throws -> String {
        try python("""
            import errno, sys
            try:
                with open(sys.argv[1], 'rb') as f: print('ok', len(f.read()))
            except OSError as e: print(errno.errorcode.get(e.errno, e.errno))
            """, [mounted.path(relative)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What listing `relative` gives: `ok N` entries or the errno's name.
    func tryList(_ mounted: MountedBundle, _ relative: String = "") throws -> String {
        try python("""
            import errno, os, sys
            try: print('ok', len(os.listdir(sys.argv[1])))
            except OSError as e: print(errno.errorcode.get(e.errno, e.errno))
            """, [mounted.path(relative)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The control socket of `mounted` (root's directory), computed as the
    /// daemon names it: SHA-256 of the canonical mountpoint, 16 bytes in hex.
    func socketPath(_ mounted: MountedBundle) throws -> String {
        let result = try python("""
            import hashlib, os, sys
            print('/run/encfs/' + hashlib.sha256(os.path.realpath(sys.argv[1]).encode()).digest()[:16].hex() + '.sock')
            """, [mounted.mountpoint])
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Skips unless root (the socket directory is /run/encfs, the memory
    /// search and other users need it).
    func requireRoot() throws {
        try XCTSkipUnless(getuid() == 0, "needs root")
    }

    /// Mounts `bundle` with `--protection complete` and one worker, reads
    /// the first 4 KiB of `relative` with O_DIRECT (the daemon opens what
    /// holds them), checks that `marker` (plaintext of what it opened) is
    /// then in the daemon's memory, locks, and checks that it is gone.
    ///
    /// - Parameters:
    ///   - expectedRead: what the reading script prints: the byte count
    ///     `preadv` returned, a space and the first byte.
    ///   - what: what holds the marker, for the messages.
    func assertLockWipes(_ marker: [UInt8], of bundle: String, keyFile: String, reading relative: String,
                         expectedRead: String, what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let mounted = try mount(bundle, keyFile: keyFile, options: ["--protection", "complete", "--threads", "1"])
        defer { unmount(mounted) }
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        let read = try python("""
            import mmap, os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
            buf = mmap.mmap(-1, 4096)
            print(os.preadv(fd, [buf], 0), buf[:1].decode())
            """, [mounted.path(relative)])
        XCTAssertEqual(read.output, expectedRead, read.summary, file: file, line: line)
        XCTAssertTrue(try memory(of: pid, contains: marker), "the search does not find \(what) while unlocked", file: file, line: line)
        assertSuccess(try ctl(mounted, ["lock"]), file: file, line: line)
        XCTAssertFalse(try memory(of: pid, contains: marker), "\(what)'s plaintext is left in the daemon's memory after lock",
                       file: file, line: line)
    }
}
