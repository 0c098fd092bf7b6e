import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-ctl lock` and `unlock` on real mounts, for each protection
/// class, `--idle-lock` and `--start-locked`.
final class LockTests: LockTestCase {
    /// The Python that opens `argv[1]`, reads 4 KiB, runs the command in
    /// `argv[3:]` (encfs-ctl lock), then reads the whole file again from
    /// the same handle: prints `locked: …` (the command's output) and
    /// `then: ok SHA256` or the errno's name.
    private static let readAcrossLock = """
        import errno, hashlib, os, subprocess, sys
        fd = os.open(sys.argv[1], os.O_RDONLY)
        assert len(os.pread(fd, 4096, 0)) == 4096
        print('locked:', subprocess.run(sys.argv[2:], capture_output=True, text=True).stdout.strip())
        try:
            data, off = b'', 0
            while True:
                piece = os.pread(fd, 65536, off)
                if not piece: break
                data, off = data + piece, off + len(piece)
            print('then: ok', hashlib.sha256(data).hexdigest())
        except OSError as e: print('then:', errno.errorcode.get(e.errno, e.errno))
        os.close(fd)
        """

    private var largeDigest: String {
        (try? python("import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())",
                     ["\(source)/docs/large"]).output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? "?"
    }

    func testLock_FileReadBefore_OpenFailsWithENOKEY() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete"])
        // Read twice: the second read comes from the kernel's page cache.
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
        XCTAssertEqual(try tryList(mounted), "ok 2")

        let lock = try ctl(mounted, ["lock"])
        assertSuccess(lock)
        XCTAssertEqual(lock.output, "locked; 0 handles still open\n")
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ENOKEY", "cached pages or names survived the lock")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertEqual(try tryList(mounted), "ENOKEY")
        XCTAssertEqual(try tryList(mounted, "docs"), "ENOKEY")
        // The root still answers stat (encfs-ctl finds the mount by it).
        var st = stat()
        XCTAssertEqual(stat(mounted.mountpoint, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")

        assertSuccess(try ctl(mounted, ["unlock", "--key-file", key]))
        XCTAssertEqual(try status(mounted)["state"], "\"unlocked\"")
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
        XCTAssertEqual(try python("import sys; print(open(sys.argv[1]).read(), end='')", [mounted.path("small")]).output,
                       "small file\n")
    }

    func testLock_Complete_OpenHandleNextReadFails() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete"])
        let result = try python(Self.readAcrossLock, [mounted.path("docs/large"), try Tools.ctl(), mounted.mountpoint, "lock"])
        assertSuccess(result)
        XCTAssertEqual(result.output, "locked: locked; 1 handle still open\nthen: ENOKEY\n")
    }

    /// Holds `argv[1]` open and mapped (shared) from before the first
    /// lock; at start and at each line on stdin prints what `pread` of the
    /// whole file gives and what reading the whole mapping gives (in a
    /// forked child, which a refused page fault kills with SIGBUS):
    /// `ok DIGEST`, the errno's name or `signal N`, separated by ` | `.
    private static let heldAcrossLocks = """
        import errno, hashlib, mmap, os, resource, sys
        fd = os.open(sys.argv[1], os.O_RDONLY)
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
        def by_pread():
            try:
                data, off = b'', 0
                while (piece := os.pread(fd, 65536, off)):
                    data, off = data + piece, off + len(piece)
                return 'ok ' + hashlib.sha256(data).hexdigest()
            except OSError as e: return errno.errorcode.get(e.errno, str(e.errno))
        def by_mapping():
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                os.write(w, hashlib.sha256(m[:]).hexdigest().encode())
                os._exit(0)
            os.close(w)
            digest = os.read(r, 64).decode()
            os.close(r)
            _, status = os.waitpid(pid, 0)
            return 'signal %d' % os.WTERMSIG(status) if os.WIFSIGNALED(status) else 'ok ' + digest
        print(by_pread(), '|', by_mapping(), flush=True)
        for line in sys.stdin:
            print(by_pread(), '|', by_mapping(), flush=True)
        """

    /// A descriptor and a shared mapping made before the first lock give
    /// no plaintext after any later lock: lock → unlock → read → lock,
    /// several times, never looking the file up again (the descriptor
    /// holds the inode), so each lock must invalidate its pages though no
    /// lookup named it since the last one.
    func testLock_Complete_RepeatedLocks_HeldDescriptorAndMapping() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete"])
        let holder = try SpawnedProcess(Tools.python, ["-c", Self.heldAcrossLocks, mounted.path("docs/large")],
                                        feedStandardInput: true)
        addTeardownBlock { holder.signal(SIGKILL); _ = holder.wait(deadline: Deadline(seconds: 10)) }
        let plaintext = "ok \(largeDigest) | ok \(largeDigest)"
        XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 30)), plaintext)
        for cycle in 1...3 {
            assertSuccess(try ctl(mounted, ["lock"]))
            XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
            holder.write("read\n")
            XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 30)), "ENOKEY | signal \(SIGBUS)",
                           "lock \(cycle): the held descriptor or mapping still gives plaintext")
            assertSuccess(try ctl(mounted, ["unlock", "--key-file", key]))
            holder.write("read\n")
            XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 30)), plaintext, "unlock \(cycle)")
        }
        holder.closeStandardInput()
        XCTAssertEqual(holder.wait(deadline: Deadline(seconds: 30))?.code, 0)
    }

    func testLock_UnlessOpen_OpenHandleFinishes() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "unless-open"])
        let result = try python(Self.readAcrossLock, [mounted.path("docs/large"), try Tools.ctl(), mounted.mountpoint, "lock"])
        assertSuccess(result)
        XCTAssertEqual(result.output, "locked: locked; 1 handle still open\nthen: ok \(largeDigest)\n")
        // Only that handle: a new open, and other files, are refused.
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ENOKEY")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertEqual(try status(mounted)["open_handles"], "0", "the handle was not released")
    }

    func testLock_UntilUnmount_RefusedWithoutForce() throws {
        let mounted = try mount(bundle, keyFile: key)
        let refused = try ctl(mounted, ["lock"])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.errorOutput.hasPrefix("encfs-ctl: error: the mount's protection is until-unmount"), refused.summary)
        XCTAssertTrue(refused.errorOutput.contains("--force"), refused.summary)
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11", "a refused lock locked")

        assertSuccess(try ctl(mounted, ["lock", "--force"]))
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertEqual(try status(mounted)["protection"], "\"until-unmount\"")
    }

    func testIdleLock_LocksByItself() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--idle-lock", "2s"])
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11")
        let fields = try status(mounted)
        XCTAssertEqual(fields["protection"], "\"complete\"", "--idle-lock alone implies complete")
        XCTAssertEqual(fields["idle_lock_seconds"], "2")
        // Generous: the machine is shared; the lock itself needs ~2 s.
        let locked = Deadline.poll(seconds: 60, interval: 0.5) { (try? self.status(mounted)["state"]) == "\"locked\"" }
        XCTAssertTrue(locked, "still unlocked after 60 s idle")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertTrue(mounted.logLines().contains { $0.contains("locked (idle for 2 s)") }, mounted.logLines().joined(separator: "\n"))
    }

    func testStartLocked_ServesNothingUntilUnlock() throws {
        let mounted = try mount(bundle, keyArguments: [], options: ["--start-locked", "--protection", "complete"])
        XCTAssertEqual(try tryList(mounted), "ENOKEY")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ENOKEY")
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")

        let unlock = try ctl(mounted, ["unlock", "--key-file", key])
        assertSuccess(unlock)
        XCTAssertEqual(unlock.output, "unlocked\n")
        XCTAssertEqual(try tryList(mounted), "ok 2")
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
    }

    func testUnlock_WrongKey_RefusedAndStaysLocked() throws {
        let mounted = try mount(bundle, keyArguments: [], options: ["--start-locked"])
        let wrong = try makeKeyFile("wrong-key")
        let refused = try ctl(mounted, ["unlock", "--key-file", wrong])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertEqual(refused.errorLines.first, "encfs-ctl: error: wrong key: no key slot opened (the bundle has raw-key slots)")
        XCTAssertEqual(refused.output, "")
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        // The right passphrase-less key still works afterwards.
        assertSuccess(try ctl(mounted, ["unlock", "--key-file", key]))
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11")
    }

    func testUnlock_FiveFailuresInAMinute_RateLimited() throws {
        let mounted = try mount(bundle, keyArguments: [], options: ["--start-locked"])
        let wrong = try makeKeyFile("wrong-key")
        for attempt in 1...5 {
            let refused = try ctl(mounted, ["unlock", "--key-file", wrong])
            XCTAssertEqual(refused.status, 1, refused.summary)
            XCTAssertTrue(refused.errorOutput.contains("wrong key"), "attempt \(attempt): \(refused.summary)")
        }
        // The sixth is refused before any key is tried, even the right one.
        let limited = try ctl(mounted, ["unlock", "--key-file", key])
        XCTAssertEqual(limited.status, 1, limited.summary)
        XCTAssertTrue(limited.errorOutput.hasPrefix("encfs-ctl: error: too many failed unlocks: try again in "), limited.summary)
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
    }

    /// `unlock` takes every key option of encfs-mount: a passphrase (the
    /// daemon runs scrypt), and a key from the kernel keyring.
    func testUnlock_PassphraseAndKeyringKey() throws {
        let passphrase = try scratch.write("passphrase", Array("correct horse \(randomHex(bytes: 6))\n".utf8), mode: 0o600)
        let both = scratch.url("both.encfs")
        try packOrThrow(source, both, keyFile: key, ["--passphrase-file", passphrase, "--scrypt-log-n", "14"])
        let mounted = try mount(both, keyArguments: [], options: ["--start-locked", "--protection", "complete"])
        let unlocked = try ctl(mounted, ["unlock", "--passphrase-file", passphrase])
        assertSuccess(unlocked)
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        let description = uniqueKeyDescription("ctl-unlock")
        try addKeyringKey(description, payload: Array(try String(contentsOfFile: key, encoding: .utf8).utf8))
        assertSuccess(try ctl(mounted, ["unlock", "--key-keyring", description]))
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ok \(Self.largeSize)")
    }

    /// Every secret of a failed unlock counts against the limit, not each
    /// request: more than five in one request are refused outright, and
    /// three failed secrets leave room for two more, not three.
    func testUnlock_ManySecretsInOneRequest_EachCounts() throws {
        let mounted = try mount(bundle, keyArguments: [], options: ["--start-locked"])
        let wrong = try (1...6).flatMap { ["--key-file", try makeKeyFile("wrong-\($0)")] }
        let six = try ctl(mounted, ["unlock"] + wrong)
        XCTAssertEqual(six.errorLines.first, "encfs-ctl: error: an unlock request may carry at most 5 secrets", six.summary)
        let three = try ctl(mounted, ["unlock"] + wrong.prefix(6))
        XCTAssertTrue(three.errorOutput.contains("wrong key"), three.summary)
        let threeMore = try ctl(mounted, ["unlock"] + wrong.suffix(6))
        XCTAssertTrue(threeMore.errorOutput.hasPrefix("encfs-ctl: error: too many failed unlocks: try again in "), threeMore.summary)
        let two = try ctl(mounted, ["unlock"] + wrong.suffix(4))
        XCTAssertTrue(two.errorOutput.contains("wrong key"), two.summary)
        // Five failed secrets within the minute: even the right key waits.
        let right = try ctl(mounted, ["unlock", "--key-file", key])
        XCTAssertTrue(right.errorOutput.hasPrefix("encfs-ctl: error: too many failed unlocks: try again in "), right.summary)
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
    }

    /// A client of the control socket, in Python: sends an unlock request
    /// with the passphrases in the files `argv[3:]` to the socket
    /// `argv[1]`. With `argv[2]` `leave`, closes the connection at once;
    /// otherwise asks for status and then `lock --force` on other
    /// connections while the unlock is tried, and prints each reply (code,
    /// first line) and whether the unlock had been answered by then.
    private static let unlockClient = """
        import select, socket, struct, sys
        def frame(body): return struct.pack('>I', len(body)) + body
        def receive(s):
            data = b''
            while len(data) < 4 or len(data) < 4 + struct.unpack('>I', data[:4])[0]:
                piece = s.recv(65536)
                if not piece: return None
                data += piece
            return data[4:]
        def connect():
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            return s
        secrets = [open(f, 'rb').read().rstrip(b'\\n') for f in sys.argv[3:]]
        unlock = connect()
        unlock.sendall(frame(bytes([4]) + b''.join(bytes([2]) + struct.pack('>I', len(p)) + p for p in secrets)))
        if sys.argv[2] == 'leave':
            unlock.close()
            sys.exit()
        def ask(code, name):
            s = connect()
            s.sendall(frame(bytes([code])))
            reply = receive(s)
            answered = select.select([unlock], [], [], 0)[0]
            print(name, reply[0], reply[1:].decode().split('\\n')[0], '(unlock answered)' if answered else '(unlock running)')
        ask(1, 'status')
        ask(3, 'lock')
        reply = receive(unlock)
        print('unlock', reply[0], reply[1:].decode())
        """

    /// A bundle whose passphrase slot costs a scrypt run of 128 MiB, so
    /// that each passphrase tried takes a while; the right passphrase's
    /// file and three wrong ones.
    private func slowPassphraseBundle() throws -> (bundle: String, right: String, wrong: [String]) {
        let right = try scratch.write("passphrase", Array("right horse \(randomHex(bytes: 6))\n".utf8), mode: 0o600)
        let wrong = try (1...3).map { try scratch.write("wrong-\($0)", Array("wrong horse \(randomHex(bytes: 6))\n".utf8), mode: 0o600) }
        let slow = scratch.url("slow.encfs")
        try packOrThrow(source, slow, keyFile: key, ["--passphrase-file", right, "--scrypt-log-n", "17"])
        return (slow, right, wrong)
    }

    /// While an unlock's passphrases are tried (several scrypt runs), the
    /// control socket answers status and `lock --force` at once; the lock
    /// then wins over the unlock that was running (told so), and the
    /// mount stays locked, as the lock's client was told.
    func testUnlock_SlowSecrets_StatusAndLockAnsweredMeanwhile() throws {
        try requireRoot()
        let slow = try slowPassphraseBundle()
        let mounted = try mount(slow.bundle, keyArguments: [], options: ["--start-locked", "--protection", "complete"])
        let result = try python(Self.unlockClient, [try socketPath(mounted), "stay"] + slow.wrong + [slow.right])
        assertSuccess(result)
        XCTAssertEqual(result.output, """
            status 0 state=locked (unlock running)
            lock 0 0 (unlock running)
            unlock 102 the mount was locked while the key was tried: it stays locked

            """)
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
    }

    /// An unlock whose client has gone before its answer is dropped: the
    /// mount does not end unlocked behind the back of a client that was
    /// told nothing.
    func testUnlock_ClientGoneMidway_MountStaysLocked() throws {
        try requireRoot()
        let slow = try slowPassphraseBundle()
        let mounted = try mount(slow.bundle, keyArguments: [], options: ["--start-locked", "--protection", "complete"])
        assertSuccess(try python(Self.unlockClient, [try socketPath(mounted), "leave"] + slow.wrong + [slow.right]))
        let dropped = Deadline.poll(seconds: 60, interval: 0.2) {
            mounted.logLines().contains { $0.contains("unlock dropped: its client has gone") }
        }
        XCTAssertTrue(dropped, mounted.logLines().joined(separator: "\n"))
        XCTAssertEqual(try status(mounted)["state"], "\"locked\"")
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        // The mount still unlocks for a client that waits for its answer.
        assertSuccess(try ctl(mounted, ["unlock", "--passphrase-file", slow.right]))
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11")
    }

    /// Connects to the socket `argv[1]` over and over for `argv[2]`
    /// seconds, each time announcing a 1000-byte request and sending one
    /// byte of it a second, so that no single read ever waits long.
    private static let trickler = """
        import socket, struct, sys, time
        end = time.monotonic() + float(sys.argv[2])
        while time.monotonic() < end:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sys.argv[1])
                s.sendall(struct.pack('>I', 1000))
                while time.monotonic() < end:
                    s.sendall(b'\\x01')
                    time.sleep(1)
            except OSError:
                time.sleep(0.1)
            finally:
                s.close()
        """

    /// A client trickling a request into the control socket does not hold
    /// the idle lock off: the whole request must come within the
    /// protocol's timeout, then the connection is dropped and the idle
    /// check runs.
    func testIdleLock_TricklingClientDoesNotHoldItOff() throws {
        try requireRoot()
        let mounted = try mount(bundle, keyFile: key, options: ["--idle-lock", "2s"])
        let trickling = try SpawnedProcess(Tools.python, ["-c", Self.trickler, try socketPath(mounted), "120"])
        defer { trickling.signal(SIGKILL); _ = trickling.wait(deadline: Deadline(seconds: 10)) }
        let locked = Deadline.poll(seconds: 60, interval: 0.5) {
            mounted.logLines().contains { $0.contains("locked (idle for 2 s)") }
        }
        XCTAssertTrue(locked, "still unlocked after 60 s idle: \(mounted.logLines().joined(separator: "\n"))")
    }

    func testMountOptions_BadValuesAreUsageErrors() throws {
        try assertMountOptionRejected("--protection", values: ["", "always", "Complete"],
                                      message: "encfs-mount: error: --protection must be complete, unless-open or until-unmount")
        try assertMountOptionRejected("--idle-lock", values: ["", "0s", "15", "5x", "-1m", "8d", "99999999999999999h"],
                                      message: "encfs-mount: error: --idle-lock must be a duration from 1s to 7d")
    }
}
