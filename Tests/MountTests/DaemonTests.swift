import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The mount process: when the background command returns, how the
/// foreground process ends, what a busy unmount does, and what the daemon
/// keeps out of /proc and off disk.
final class DaemonTests: ToolTestCase {
    private var source = ""
    private var key = ""
    private var bundle = ""
    private let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/file", content)
        try scratch.write("src/small", Array("small\n".utf8))
        key = try makeKeyFile()
        bundle = scratch.url("d.encfs")
        try packOrThrow(source, bundle, keyFile: key)
    }

    /// The raw bytes of `/proc/<pid>/<name>`.
    private func procFile(_ pid: pid_t, _ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/\(name)") else {
            throw SubprocessError("cannot read /proc/\(pid)/\(name)")
        }
        return [UInt8](data)
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    // MARK: - Background

    func testBackgroundMount_ServesWhenCommandReturns() throws {
        for round in 0..<5 {
            let mnt = try scratch.makeDirectory("mnt\(round)")
            addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
            let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key])
            assertSuccess(result)
            // No waiting: the mount must serve the moment the command is back.
            XCTAssertTrue(MountTable.isMounted(mnt), "round \(round): not in mountinfo")
            let stat = try run("stat", ["-c", "%s", "\(mnt)/file"])
            XCTAssertEqual(stat.output, "300000\n", "round \(round): \(stat.summary)")
            XCTAssertEqual(try check("cat", ["\(mnt)/small"]).output, "small\n")
            XCTAssertEqual(result.stdout, [])
            XCTAssertEqual(result.stderr, [], "a successful mount prints nothing")
            let daemon = try XCTUnwrap(ProcessTable.daemon(servingAt: mnt))
            try check(Tools.fusermount, ["-u", mnt])
            XCTAssertFalse(MountTable.isMounted(mnt))
            XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(daemon) }, "daemon \(daemon) outlived its mount")
        }
    }

    /// The daemon serves the file the command opened and verified (handed
    /// over as a descriptor), not whatever is at the path later: a bundle
    /// renamed over the original after mounting changes nothing, even for
    /// index pages and chunks read only after the kernel dropped its caches.
    func testBackgroundDaemon_ServesTheVerifiedFileNotThePath() throws {
        let other = try scratch.makeDirectory("other")
        try scratch.write("other/file", Array(repeating: 0x5A, count: content.count))
        try scratch.write("other/elsewhere", Array("other\n".utf8))
        let otherBundle = scratch.url("other.encfs")
        try packOrThrow(other, otherBundle, keyFile: key)
        let mounted = try mount(bundle, keyFile: key, options: ["--index-cache", "64"])
        XCTAssertEqual(rename(otherBundle, bundle), 0, String(cString: strerror(errno)))
        try check("sh", ["-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mounted.mountpoint).sorted(), ["file", "small"])
        let cmp = try run("cmp", [scratch.url("src/file"), mounted.path("file")])
        XCTAssertEqual(cmp.status, 0, cmp.summary)
        XCTAssertEqual(try String(contentsOfFile: mounted.path("small"), encoding: .utf8), "small\n")
    }

    func testBackgroundDaemon_DetachedFromTerminalAndDirectories() throws {
        let mounted = try mount(bundle, keyFile: key)
        let pid = try XCTUnwrap(mounted.daemonPID)
        // Its own session, stdio on /dev/null, working directory "/" (so it
        // pins no directory), and the log file it was given.
        let stat = String(decoding: try procFile(pid, "stat"), as: UTF8.self)
        let fields = stat[stat.index(after: try XCTUnwrap(stat.lastIndex(of: ")")))...].split(separator: " ")
        XCTAssertEqual(fields[3], Substring(String(pid)), "session id")
        for fd in 0...2 {
            XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"), "/dev/null")
        }
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd"), "/")
        // One "serving" line; the transport may add its own info line.
        let lines = mounted.logLines()
        XCTAssertEqual(lines.filter { $0.contains("info: serving (\(mounted.mountpoint))") }.count, 1, "\(lines)")
        XCTAssertEqual(lines.filter { !$0.contains(" info: ") }, [], "\(lines)")
        unmount(mounted)
        XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(pid) })
        XCTAssertTrue(mounted.logLines().last?.contains("info: unmounted") ?? false, "\(mounted.logLines())")
    }

    /// ps, pgrep and killall find the daemon by its name, although it is
    /// started through /proc/self/exe (which would name it "exe").
    func testBackgroundDaemon_ProcessNameIsEncfsMount() throws {
        let mounted = try mount(bundle, keyFile: key)
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(String(decoding: try procFile(pid, "comm"), as: UTF8.self), "encfs-mount\n")
        XCTAssertEqual(try check("ps", ["-o", "comm=", "-p", String(pid)]).output, "encfs-mount\n")
        XCTAssertTrue(try check("pgrep", ["-x", "encfs-mount"]).output.split(separator: "\n").contains(Substring(String(pid))))
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
        XCTAssertEqual(exe, URL(fileURLWithPath: try Tools.mount()).resolvingSymlinksInPath().path)
        unmount(mounted)
    }

    /// The daemon is the very program the command runs, not whatever its
    /// path names by the time the daemon starts. A file bind-mounted over
    /// the binary's path while the command waits for its key makes the
    /// path name another program; a daemon started from the resolved path
    /// would run that one.
    func testBackgroundDaemon_RunsTheStartedProgramNotWhatItsPathNamesLater() throws {
        let binary = scratch.url("bin/encfs-mount")
        try scratch.makeDirectory("bin")
        try check("cp", [try Tools.mount(), binary])
        let marker = scratch.url("impostor-ran")
        let impostor = try scratch.write("impostor", Array("#!/bin/sh\necho \"$@\" > '\(marker)'\nexit 1\n".utf8), mode: 0o755)
        let mnt = try scratch.makeDirectory("mnt-impostor")
        let log = scratch.url("impostor.log")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let command = try SpawnedProcess(binary, [bundle, mnt, "--key-file", "/dev/stdin", "--log-file", log],
                                         captureStandardError: true, feedStandardInput: true)
        // Blocked reading the key: the program is loaded, the daemon not yet started.
        XCTAssertTrue(Deadline.poll(seconds: 30) {
            (try? String(contentsOfFile: "/proc/\(command.pid)/wchan", encoding: .utf8))?.contains("pipe") ?? false
        }, "encfs-mount never waited for its key")
        try check("mount", ["--bind", impostor, binary])
        addTeardownBlock { _ = try? Subprocess.run("umount", [binary]) }
        command.write(try String(contentsOfFile: key, encoding: .utf8))
        command.closeStandardInput()
        let (_, stderr, timedOut) = command.drain(deadline: Deadline(seconds: 60))
        XCTAssertFalse(timedOut)
        XCTAssertEqual(command.wait(deadline: Deadline(seconds: 10)), ExitStatus(code: 0, signal: nil),
                       String(decoding: stderr, as: UTF8.self))
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "the program at the path ran as the daemon")
        XCTAssertTrue(MountTable.isServing(mnt))
        XCTAssertEqual(try String(contentsOfFile: "\(mnt)/small", encoding: .utf8), "small\n")
        let daemon = try XCTUnwrap(ProcessTable.daemon(servingAt: mnt))
        XCTAssertEqual(String(decoding: try procFile(daemon, "comm"), as: UTF8.self), "encfs-mount\n")
    }

    func testKilledDaemon_MountReportsENOTCONNAndIsCleanedUp() throws {
        // What the teardown fallback is for: a daemon that died under its mount.
        let mounted = try mount(bundle, keyFile: key)
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(pid) })
        let stat = try run("stat", [mounted.path("small")])
        XCTAssertNotEqual(stat.status, 0)
        // ENOTCONN once the kernel has noticed the device closed; a request
        // caught in flight when the daemon died gets ECONNABORTED instead,
        // or ECANCELED when a FUSE ring handed it to a thread already gone.
        XCTAssertTrue(stat.errorOutput.contains("Transport endpoint is not connected")
                      || stat.errorOutput.contains("Software caused connection abort")
                      || stat.errorOutput.contains("Operation canceled"), stat.errorOutput)
        XCTAssertTrue(MountTable.isMounted(mounted.mountpoint))
        MountedBundle.unmount(mountpoint: mounted.mountpoint, foreground: nil)
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
    }

    // MARK: - Foreground and signals

    private func checkSignalEndsForeground(_ signal: Int32, file: StaticString = #filePath, line: UInt = #line) throws {
        let mounted = try mount(bundle, keyFile: key, foreground: true)
        let process = try XCTUnwrap(mounted.foreground)
        XCTAssertEqual(try check("cat", [mounted.path("small")]).output, "small\n", file: file, line: line)
        process.signal(signal)
        let status = process.wait(deadline: Deadline(seconds: 10))
        XCTAssertEqual(status, ExitStatus(code: 0, signal: nil), "signal \(signal)", file: file, line: line)
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint), file: file, line: line)
        XCTAssertFalse(MountTable.isServing(mounted.mountpoint), file: file, line: line)
        // The mountpoint is a plain, empty directory again.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mounted.mountpoint), [], file: file, line: line)
    }

    func testForeground_SIGTERMUnmountsCleanly() throws {
        try checkSignalEndsForeground(SIGTERM)
    }

    func testForeground_SIGINTUnmountsCleanly() throws {
        try checkSignalEndsForeground(SIGINT)
    }

    func testForeground_SIGHUPUnmountsCleanly() throws {
        try checkSignalEndsForeground(SIGHUP)
    }

    func testBackgroundDaemon_SIGTERMUnmountsCleanly() throws {
        let mounted = try mount(bundle, keyFile: key)
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(kill(pid, SIGTERM), 0)
        XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(pid) })
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
        let lines = mounted.logLines()
        XCTAssertTrue(lines.last?.contains("info: unmounted") ?? false, "\(lines)")
        XCTAssertEqual(lines.filter { $0.contains("error") }, [])
    }

    func testForeground_FusermountEndsProcessWithExitZero() throws {
        let mounted = try mount(bundle, keyFile: key, foreground: true)
        let process = try XCTUnwrap(mounted.foreground)
        try check(Tools.fusermount, ["-u", mounted.mountpoint])
        XCTAssertEqual(process.wait(deadline: Deadline(seconds: 10)), ExitStatus(code: 0, signal: nil))
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
    }

    // MARK: - Busy unmount

    func testUnmount_WhileReaderHoldsFileOpen() throws {
        let mounted = try mount(bundle, keyFile: key)
        let daemon = try XCTUnwrap(mounted.daemonPID)
        // Opens the file, reads a little, reports, waits for a line on
        // stdin, then reads the rest through the same descriptor.
        let holder = try SpawnedProcess(Tools.python, ["-c", """
        import hashlib, sys
        f = open(sys.argv[1], "rb")
        h = hashlib.sha256(f.read(10))
        print("open", flush=True)
        sys.stdin.readline()
        h.update(f.read())
        print(h.hexdigest(), flush=True)
        """, mounted.path("file")], feedStandardInput: true)
        addTeardownBlock {
            holder.signal(SIGKILL)
            _ = holder.wait(deadline: Deadline(seconds: 5))
        }
        XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 10)), "open")

        // A plain unmount refuses a busy file system and changes nothing.
        let busy = try run(Tools.fusermount, ["-u", mounted.mountpoint])
        XCTAssertEqual(busy.status, 1, busy.summary)
        XCTAssertTrue(busy.errorOutput.contains("busy"), busy.errorOutput)
        XCTAssertTrue(MountTable.isMounted(mounted.mountpoint))
        XCTAssertTrue(ProcessTable.isAlive(daemon))

        // A lazy unmount detaches it at once; the daemon keeps serving the
        // open file and ends when the reader closes it.
        try check(Tools.fusermount, ["-uz", mounted.mountpoint])
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
        usleep(200_000)
        XCTAssertTrue(ProcessTable.isAlive(daemon), "the daemon must serve the open file")
        holder.write("go\n")
        let digest = try check("sha256sum", ["\(source)/file"]).output.prefix(64)
        XCTAssertEqual(holder.readLine(deadline: Deadline(seconds: 10)).map { Substring($0) }, digest)
        XCTAssertEqual(holder.wait(deadline: Deadline(seconds: 10)), ExitStatus(code: 0, signal: nil))
        XCTAssertTrue(Deadline.poll(seconds: 10) { !ProcessTable.isAlive(daemon) }, "daemon \(daemon) outlived the last reader")
        XCTAssertTrue(mounted.logLines().last?.contains("info: unmounted") ?? false, "\(mounted.logLines())")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("error") }, [])
    }

    // MARK: - Secrets

    private func checkKeyAbsent(from pid: pid_t, hex: String, log: MountedBundle, file: StaticString = #filePath, line: UInt = #line) throws {
        let environ = try procFile(pid, "environ")
        let cmdline = try procFile(pid, "cmdline")
        let logBytes = log.logFile.flatMap { FileManager.default.contents(atPath: $0) }.map { [UInt8]($0) } ?? []
        XCTAssertFalse(environ.isEmpty, file: file, line: line)
        for form in [hex.lowercased(), hex.uppercased()] {
            XCTAssertFalse(contains(environ, Array(form.utf8)), "key in /proc/\(pid)/environ", file: file, line: line)
            XCTAssertFalse(contains(cmdline, Array(form.utf8)), "key in /proc/\(pid)/cmdline", file: file, line: line)
            XCTAssertFalse(contains(logBytes, Array(form.utf8)), "key in the log", file: file, line: line)
            // No half of it either.
            XCTAssertFalse(contains(environ, Array(form.prefix(32).utf8)), file: file, line: line)
            XCTAssertFalse(contains(environ, Array(form.suffix(32).utf8)), file: file, line: line)
        }
        // The variable is gone from what a child would inherit (a live
        // environ shows "ENCFS_KEY=" with the value wiped at most).
        let entries = environ.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        for entry in entries where entry.hasPrefix("ENCFS_KEY=") {
            XCTAssertTrue(entry.dropFirst("ENCFS_KEY=".count).allSatisfy { $0 == "\0" }, entry, file: file, line: line)
        }
    }

    func testEnvironmentKey_NotVisibleInBackgroundDaemon() throws {
        let hex = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_KEY": hex])
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(try check("cat", [mounted.path("small")]).output, "small\n")
        try checkKeyAbsent(from: pid, hex: hex, log: mounted)
        let entries = try procFile(pid, "environ").split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        XCTAssertFalse(entries.contains { $0.hasPrefix("ENCFS_KEY=") }, "the daemon was started without it")
    }

    func testEnvironmentKey_NotVisibleInForegroundProcess() throws {
        let hex = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_KEY": hex], foreground: true)
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(try check("cat", [mounted.path("small")]).output, "small\n")
        try checkKeyAbsent(from: pid, hex: hex, log: mounted)
    }

    func testDaemon_CoreDumpsDisabled() throws {
        for foreground in [false, true] {
            let mounted = try mount(bundle, keyFile: key, foreground: foreground)
            let pid = try XCTUnwrap(mounted.daemonPID)
            let limits = String(decoding: try procFile(pid, "limits"), as: UTF8.self)
            let line = try XCTUnwrap(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
            let values = line.dropFirst("Max core file size".count).split(separator: " ")
            XCTAssertEqual(values.prefix(2), ["0", "0"], "foreground \(foreground): \(line)")
            // PR_SET_DUMPABLE 0 is not visible in /proc to root (it only
            // hands /proc/<pid> files to root, which owns them anyway here).
            unmount(mounted)
        }
    }
}
