import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The control socket: who may reach it, where it lives, what happens to
/// it at unmount and after a killed daemon, and `status --json`.
final class ControlSocketTests: LockTestCase {
    /// Connects to `argv[1]` as whoever runs it, sends a status request
    /// and prints `reply CODE TEXT…`, or the errno's name.
    private static let rawStatus = """
        import errno, socket, struct, sys
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sys.argv[1])
            s.sendall(struct.pack('>I', 1) + bytes([1]))
            n = struct.unpack('>I', s.recv(4))[0]
            body = b''
            while len(body) < n: body += s.recv(n - len(body))
            print('reply', body[0], body[1:].decode().split('\\n')[0])
        except OSError as e: print(errno.errorcode.get(e.errno, e.errno))
        """

    func testSocket_OwnerOnly_RemovedAtUnmount() throws {
        try requireRoot()
        let mounted = try mount(bundle, keyFile: key)
        let path = try socketPath(mounted)
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0, "no socket at \(path)")
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(st.st_uid, 0)
        XCTAssertEqual(lstat("/run/encfs", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700)
        XCTAssertEqual(try python(Self.rawStatus, [path]).output, "reply 0 state=unlocked\n")

        unmount(mounted)
        XCTAssertNotEqual(lstat(path, &st), 0, "the socket outlived the mount")
    }

    /// Runs `argv[2]` (``rawStatus``) as another user (nobody) on the socket
    /// at `argv[1]`, reached through a descriptor passed down to it
    /// (`/proc/self/fd/N` of an `O_PATH` descriptor) instead of its path,
    /// so the 0700 directory is not searched; prints what it printed.
    private static let statusThroughPassedDescriptor = """
        import os, subprocess, sys
        fd = os.open(sys.argv[1], os.O_PATH)
        other = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', sys.executable, '-c', sys.argv[2], '/proc/self/fd/%d' % fd]
        print(subprocess.run(other, pass_fds=[fd], capture_output=True, text=True).stdout, end='')
        """

    func testSocket_OtherUserCannotConnect() throws {
        try requireRoot()
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete"])
        let path = try socketPath(mounted)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", Tools.python, "-c", Self.rawStatus, path]
        // The 0700 directory stops another user first…
        XCTAssertEqual(try run("setpriv", asNobody).output, "EACCES\n")
        // …and with the socket opened up by hand and reached without
        // searching the directory (which stays as it is: other mounts on
        // the machine use it), the daemon's own peer check (SO_PEERCRED)
        // still refuses.
        XCTAssertEqual(chmod(path, 0o666), 0)
        let refused = try python(Self.statusThroughPassedDescriptor, [path, Self.rawStatus]).output
        XCTAssertEqual(refused, "reply 96 permission denied: only the user who mounted, or root, may control this mount\n")
        XCTAssertEqual(try status(mounted)["state"], "\"unlocked\"")
    }

    func testStatusJSON_ParsesWithEveryField() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "unless-open", "--idle-lock", "15m"])
        let fields = try status(mounted)
        XCTAssertEqual(fields["mountpoint"], "\"\(mounted.mountpoint)\"")
        XCTAssertEqual(fields["state"], "\"unlocked\"")
        XCTAssertEqual(fields["locked"], "false")
        XCTAssertEqual(fields["protection"], "\"unless-open\"")
        XCTAssertEqual(fields["open_handles"], "0")
        XCTAssertEqual(fields["idle_lock_seconds"], "900")
        XCTAssertNotNil(fields["idle_seconds"].flatMap { Int($0) }, "\(fields)")

        let text = try ctl(mounted, ["status"])
        assertSuccess(text)
        XCTAssertTrue(text.output.hasPrefix("state:        unlocked\nprotection:   unless-open\nopen handles: 0\nidle lock:    after 900 s\n"),
                      text.output)
    }

    func testStaleSocket_FromKilledDaemon_IsReplaced() throws {
        try requireRoot()
        let mountpoint = try scratch.makeDirectory("mnt-stale")
        let first = try mount(bundle, keyFile: key, at: mountpoint)
        let path = try socketPath(first)
        guard let pid = first.daemonPID else { throw SubprocessError("no daemon") }
        kill(pid, SIGKILL)
        XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(pid) })
        _ = try run(Tools.fusermount, ["-uz", mountpoint])
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0, "the killed daemon's socket should still be there")
        XCTAssertEqual(try python(Self.rawStatus, [path]).output, "ECONNREFUSED\n")

        let second = try mount(bundle, keyFile: key, at: mountpoint)
        XCTAssertEqual(try python(Self.rawStatus, [path]).output, "reply 0 state=unlocked\n")
        XCTAssertEqual(try status(second)["state"], "\"unlocked\"")
    }

    /// Sockets of daemons killed at other mountpoints do not pile up: the
    /// next mount removes them, and only them (a live mount's socket stays
    /// and answers).
    func testStaleSockets_OfKilledDaemons_AreRemovedAtTheNextMount() throws {
        try requireRoot()
        let live = try mount(bundle, keyFile: key, at: try scratch.makeDirectory("mnt-live"))
        let killed = try mount(bundle, keyFile: key, at: try scratch.makeDirectory("mnt-killed"))
        let stale = try socketPath(killed)
        guard let pid = killed.daemonPID else { throw SubprocessError("no daemon") }
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 15) { !ProcessTable.isAlive(pid) })
        _ = try run(Tools.fusermount, ["-uz", killed.mountpoint])
        XCTAssertEqual(try python(Self.rawStatus, [stale]).output, "ECONNREFUSED\n")
        let dead = try run(try Tools.ctl(), [killed.mountpoint, "status"])
        XCTAssertEqual(dead.errorLines.first, "encfs-ctl: error: the mount's daemon does not answer (it was killed?) (\(killed.mountpoint))")

        let next = try mount(bundle, keyFile: key, at: try scratch.makeDirectory("mnt-next"))
        var st = stat()
        XCTAssertNotEqual(lstat(stale, &st), 0, "the killed daemon's socket is still there")
        XCTAssertTrue(next.logLines().contains { $0.contains("control socket") && $0.contains("of killed daemons") }, "\(next.logLines())")
        let gone = try run(try Tools.ctl(), [killed.mountpoint, "status"])
        XCTAssertEqual(gone.errorLines.first, "encfs-ctl: error: no control socket for this mountpoint (\(killed.mountpoint))")
        XCTAssertEqual(try python(Self.rawStatus, [try socketPath(live)]).output, "reply 0 state=unlocked\n")
        XCTAssertEqual(try python(Self.rawStatus, [try socketPath(next)]).output, "reply 0 state=unlocked\n")
    }

    /// A foreground mount with a control thread (polling once a second for
    /// its idle timer) still ends cleanly on SIGTERM: the thread stops,
    /// the mount goes and so does the socket.
    func testForegroundMount_SIGTERM_EndsMountAndSocket() throws {
        try requireRoot()
        let mounted = try mount(bundle, keyFile: key, options: ["--idle-lock", "1h"], foreground: true)
        let path = try socketPath(mounted)
        XCTAssertEqual(try status(mounted)["state"], "\"unlocked\"")
        guard let process = mounted.foreground else { throw SubprocessError("no foreground process") }
        process.signal(SIGTERM)
        let status = process.wait(deadline: Deadline(seconds: 30))
        XCTAssertEqual(status?.code, 0, "the foreground mount did not end cleanly on SIGTERM")
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
        var st = stat()
        XCTAssertNotEqual(lstat(path, &st), 0, "the socket outlived the mount")
    }

    /// Listens on the socket `argv[1]` as whoever runs it, and reads
    /// whatever any client sends until no client has come for `argv[2]`
    /// seconds; prints `listening` once bound, then `received N` (bytes).
    private static let fakeDaemon = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.bind(sys.argv[1])
        s.listen(4)
        s.settimeout(float(sys.argv[2]))
        print('listening', flush=True)
        total = 0
        try:
            while True:
                c, _ = s.accept()
                c.settimeout(3)
                try:
                    while True:
                        piece = c.recv(65536)
                        if not piece: break
                        total += len(piece)
                except OSError: pass
                c.close()
        except OSError: pass
        print('received', total, flush=True)
        """

    /// Runs `encfs-ctl MOUNTPOINT unlock --key-file KEY` as root with
    /// `XDG_RUNTIME_DIR` set to a runtime directory of nobody's, where a
    /// process of nobody's listens on the socket named after `mountpoint`.
    ///
    /// - Returns: encfs-ctl's result and how many bytes the listener got.
    private func unlockAgainstFakeDaemon(_ mountpoint: String) throws -> (ctl: ProcessResult, received: String) {
        let runtime = try nobodysRuntimeDirectory()
        let directory = "\(runtime)/encfs"
        let socket = try python("""
            import hashlib, os, sys
            print(sys.argv[2] + '/' + hashlib.sha256(os.path.realpath(sys.argv[1]).encode()).digest()[:16].hex() + '.sock')
            """, [mountpoint, directory]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        let listener = try SpawnedProcess("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                      Tools.python, "-c", Self.fakeDaemon, socket, "5"])
        XCTAssertEqual(listener.readLine(deadline: Deadline(seconds: 30)), "listening")
        let result = try run(try Tools.ctl(), [mountpoint, "unlock", "--key-file", key], environment: ["XDG_RUNTIME_DIR": runtime])
        let out = listener.drain(deadline: Deadline(seconds: 60))
        return (result, String(decoding: out.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A runtime directory of nobody's with its `encfs` directory in it,
    /// both 0700, in a scratch directory nobody may search.
    private func nobodysRuntimeDirectory() throws -> String {
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let name = uniqueName("runtime")
        let runtime = try scratch.makeDirectory(name)
        for path in [runtime, try scratch.makeDirectory("\(name)/encfs")] {
            XCTAssertEqual(chown(path, 65534, 65534), 0)
            XCTAssertEqual(chmod(path, 0o700), 0)
        }
        return runtime
    }

    /// What the checks are for still works: root reaches a user's own
    /// mount through that user's runtime directory. Needs a machine where
    /// users may mount (/dev/fuse open to them, as it is by default).
    func testCtlAsRoot_UsersMountThroughItsRuntimeDirectory() throws {
        try requireRoot()
        var device = stat()
        try XCTSkipUnless(stat("/dev/fuse", &device) == 0 && device.st_mode & 0o006 == 0o006,
                          "/dev/fuse is not open to other users here, so nobody cannot mount")
        let runtime = try nobodysRuntimeDirectory()
        let mountpoint = try scratch.makeDirectory("mnt-nobody")
        for path in [mountpoint, key] { XCTAssertEqual(chown(path, 65534, 65534), 0) }
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let mounted = try run("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", try Tools.mount(), bundle,
                                          mountpoint, "--key-file", key, "--protection", "complete"],
                              environment: ["XDG_RUNTIME_DIR": runtime])
        assertSuccess(mounted)
        let asRoot: [String: String?] = ["XDG_RUNTIME_DIR": runtime]
        let status = try run(try Tools.ctl(), [mountpoint, "status"], environment: asRoot)
        assertSuccess(status)
        XCTAssertTrue(status.output.hasPrefix("state:        unlocked\n"), status.summary)
        assertSuccess(try run(try Tools.ctl(), [mountpoint, "lock"], environment: asRoot))
        assertSuccess(try run(try Tools.ctl(), [mountpoint, "unlock", "--key-file", key], environment: asRoot))
    }

    /// Root's encfs-ctl, with a runtime directory inherited from a user
    /// (`su`, `sudo -E`), sends the key only to a daemon that is that
    /// user's and serves that mountpoint: not to whoever listens in the
    /// user's directory for a directory that is no mount of theirs.
    func testCtlAsRoot_FakeSocketInAUsersRuntimeDirectory_GetsNoKey() throws {
        try requireRoot()
        let plain = try scratch.makeDirectory("plain")
        let (result, received) = try unlockAgainstFakeDaemon(plain)
        XCTAssertEqual(received, "received 0", "the key went to the fake daemon")
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertTrue(result.errorLines.first?.hasPrefix(
            "encfs-ctl: error: refusing the control socket: its owner (uid 65534) has no encfs mount at this mountpoint") ?? false,
                      result.summary)
    }

    /// Root never falls back from a socket in /run/encfs, even one whose
    /// daemon was killed, to the runtime directory it inherited.
    func testCtlAsRoot_DeadRootSocket_NoFallBackToTheRuntimeDirectory() throws {
        try requireRoot()
        let mountpoint = try scratch.makeDirectory("mnt-dead")
        let killed = try mount(bundle, keyFile: key, at: mountpoint)
        guard let pid = killed.daemonPID else { throw SubprocessError("no daemon") }
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 15) { !ProcessTable.isAlive(pid) })
        _ = try run(Tools.fusermount, ["-uz", mountpoint])
        let (result, received) = try unlockAgainstFakeDaemon(mountpoint)
        XCTAssertEqual(received, "received 0", "the key went to the fake daemon")
        XCTAssertEqual(result.errorLines.first, "encfs-ctl: error: the mount's daemon does not answer (it was killed?) (\(mountpoint))",
                       result.summary)
    }

    func testCtl_NotAMount_OneClearLine() throws {
        let plain = try scratch.makeDirectory("plain")
        let result = try run(try Tools.ctl(), [plain, "status"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.first, "encfs-ctl: error: no control socket for this mountpoint (\(plain))")
        XCTAssertEqual(result.output, "")
    }

    func testCtl_UsageErrors() throws {
        let plain = try scratch.makeDirectory("plain")
        for arguments in [[String](), [plain], [plain, "open"], [plain, "status", "extra"], [plain, "status", "--bogus"]] {
            let result = try run(try Tools.ctl(), arguments)
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-ctl: error: "), result.summary)
            XCTAssertEqual(result.errorLines.last, "hint: see encfs-ctl --help")
        }
        let help = try run(try Tools.ctl(), ["--help"])
        assertSuccess(help)
        XCTAssertTrue(help.output.hasPrefix("usage: encfs-ctl MOUNTPOINT status"))
        let version = try run(try Tools.ctl(), ["--version"])
        assertSuccess(version)
        XCTAssertTrue(version.output.hasPrefix("encfs-ctl "))
    }
}
