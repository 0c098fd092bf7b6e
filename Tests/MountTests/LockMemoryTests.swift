import CryptCore
import EncFSCore
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// After a lock, the daemon's memory holds no key: every readable region
/// of `/proc/PID/mem` is searched, as root, for the content key, the keys
/// derived from it and the key of the file that was read.
final class LockMemoryTests: LockTestCase {
    /// The keys of the bundle and of `docs/large`, by name.
    private func keyNeedles() throws -> [String: [UInt8]] {
        let keyFile = try KeyFiles.readKeyFile(Array(key.utf8))
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: [.rawKey(keyFile)])
        let docs = try reader.index.resolve(path: Array("docs/large".utf8))
        func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
        return ["content": bytes(reader.keys.contentKey), "index": bytes(reader.keys.indexKey),
                "header_mac": bytes(reader.keys.headerMACKey), "file": bytes(try reader.fileKey(for: docs)),
                "key_file": bytes(keyFile)]
    }

    private func found(in pid: pid_t, _ needles: [String: [UInt8]]) throws -> [String] {
        try namesFound(inMemoryOf: pid, needles)
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

    /// Names looked up just before a lock are not in the daemon's memory
    /// after it: not in the requests that carried them (libfuse's receive
    /// buffers on the classic loop, the ring entries and the rebuilt
    /// request on the rings), nor in the index, which the lock drops. One
    /// name is a file's, one is missing (in no index at all: only a
    /// request ever held it); both are long, as a name past a lookup
    /// reply's 128 bytes outlived the reply in a ring entry.
    func testLock_NamesLookedUpBefore_NotInDaemonMemory() throws {
        try requireRoot()
        let present = "present-" + randomHex(bytes: 60)
        let missing = "missing-" + randomHex(bytes: 60)
        try scratch.write("src/docs/\(present)", Array("named file\n".utf8))
        let named = scratch.url("named.encfs")
        try packOrThrow(source, named, keyFile: key)
        let mounted = try mount(named, keyFile: key, options: ["--protection", "complete"])
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        let looked = try python("""
            import errno, os, sys
            for path in sys.argv[1:]:
                try: print(os.stat(path).st_size)
                except OSError as e: print(errno.errorcode.get(e.errno, e.errno))
            """, [mounted.path("docs/\(present)"), mounted.path("docs/\(missing)")])
        XCTAssertEqual(looked.output, "11\nENOENT\n", looked.summary)
        let needles = ["present": Array(present.utf8), "missing": Array(missing.utf8)]
        // The control: the unlocked index holds the file's name.
        XCTAssertTrue(try found(in: pid, needles).contains("present"), "the search does not find the file's name while unlocked")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertEqual(try found(in: pid, needles), [], "names looked up before the lock are left in the daemon's memory")
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
