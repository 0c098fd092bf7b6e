import CryptCore
import EncFSCore
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// After a lock, the daemon's memory holds no key: every readable region
/// of `/proc/PID/mem` is searched, as root, for the content key, the keys
/// derived from it and the key of the file that was read.
final class LockMemoryTests: LockTestCase {
    /// Prints the names (argv[2:] are `name=hex` pairs) of the byte
    /// strings found anywhere in the readable memory of process argv[1].
    private static let searchMemory = """
        import sys
        pid = int(sys.argv[1])
        needles = dict(arg.split('=') for arg in sys.argv[2:])
        needles = {name: bytes.fromhex(hex) for name, hex in needles.items()}
        found, searched = set(), 0
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split('-'))
                if 'r' not in fields[1] or (len(fields) > 5 and fields[5] in ('[vvar]', '[vvar_vclock]', '[vsyscall]')):
                    continue
                try:
                    mem.seek(lo)
                    data = mem.read(hi - lo)
                except OSError:
                    continue
                searched += len(data)
                found |= {name for name, needle in needles.items() if needle in data}
        print('searched', searched)
        print('found', ' '.join(sorted(found)))
        """

    /// The keys of the bundle and of `docs/large`, as `name=hex` pairs.
    private func keyNeedles() throws -> [String] {
        let keyFile = try KeyFiles.readKeyFile(Array(key.utf8))
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: [.rawKey(keyFile)])
        let docs = try reader.index.resolve(path: Array("docs/large".utf8))
        func hex(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Hex.encode(Array($0)) } }
        return ["content=\(hex(reader.keys.contentKey))", "index=\(hex(reader.keys.indexKey))",
                "header_mac=\(hex(reader.keys.headerMACKey))", "file=\(hex(try reader.fileKey(for: docs)))",
                "key_file=\(hex(keyFile))"]
    }

    private func found(in pid: pid_t, _ needles: [String]) throws -> [String] {
        let result = try python(Self.searchMemory, [String(pid)] + needles, timeout: 300)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        let lines = result.output.split(separator: "\n")
        let searched = lines.first { $0.hasPrefix("searched ") }.flatMap { Int($0.dropFirst(9)) } ?? 0
        XCTAssertGreaterThan(searched, 1 << 20, "the search read almost nothing: \(result.output)")
        return lines.first { $0.hasPrefix("found") }.map { $0.dropFirst(5).split(separator: " ").map(String.init) } ?? []
    }

    func testLock_DaemonMemoryHoldsNoKey() throws {
        try requireRoot()
        let needles = try keyNeedles()
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete"])
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
        // The control: the search finds what the daemon holds while
        // unlocked (the reader keeps the content key and the index key;
        // the worker that read keeps the file's key).
        let before = try found(in: pid, needles)
        XCTAssertTrue(before.contains("content"), "the search does not find the content key while unlocked: \(before)")
        XCTAssertTrue(before.contains("file"), "the search does not find the file key while unlocked: \(before)")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertEqual(try found(in: pid, needles), [], "keys left in the daemon's memory after lock")

        // An unlock through the socket (the key file's key travels to the
        // daemon) and another lock leave nothing either.
        assertSuccess(try ctl(mounted, ["unlock", "--key-file", key]))
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertEqual(try found(in: pid, needles), [], "keys left in the daemon's memory after unlock and lock")
    }

    /// Under `unless-open` a file open at the lock keeps its own key, and
    /// only that, until it is closed; then that key is wiped too.
    func testLock_UnlessOpen_OnlyTheOpenFilesKey_WipedAtClose() throws {
        try requireRoot()
        let needles = try keyNeedles()
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "unless-open"])
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        // Holds docs/large open (first 4 KiB read); reads the rest after a
        // line on stdin, closes at end of stdin.
        let holder = try SpawnedProcess(Tools.python, ["-c", """
            import os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.pread(fd, 4096, 0)
            print('open', flush=True)
            sys.stdin.readline()
            n, off = 0, 4096
            while (piece := os.pread(fd, 65536, off)):
                n, off = n + len(piece), off + len(piece)
            print('read', n, flush=True)
            sys.stdin.read()
            os.close(fd)
            """, mounted.path("docs/large")], feedStandardInput: true)
        addTeardownBlock { holder.signal(SIGKILL); _ = holder.wait(deadline: Deadline(seconds: 10)) }
        XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 30)), "open")

        let lock = try ctl(mounted, ["lock"])
        XCTAssertEqual(lock.output, "locked; 1 handle still open\n", lock.summary)
        XCTAssertEqual(try found(in: pid, needles), ["file"], "only the open file's key may stay")
        // Reads after the lock go through the handle's own key.
        holder.write("go\n")
        XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 30)), "read \(Self.largeSize - 4096)")
        XCTAssertEqual(try found(in: pid, needles), ["file"], "only the open file's key may stay")

        holder.closeStandardInput()
        XCTAssertEqual(holder.wait(deadline: Deadline(seconds: 30))?.code, 0)
        XCTAssertTrue(Deadline.poll(seconds: 30, interval: 0.2) { (try? self.status(mounted)["open_handles"]) == "0" })
        XCTAssertEqual(try found(in: pid, needles), [], "the open file's key outlived its handle")
    }
}
