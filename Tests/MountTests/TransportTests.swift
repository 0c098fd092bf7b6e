import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `--transport uring|classic` through the real executables: which
/// transport serves (encfs-ctl status, and the rings' request count, which
/// only a request carried by a ring raises), the module parameter root
/// turns on, the fallback when it is off for a user who may not, the
/// error when uring is required but unavailable, a lock's ENOKEY and
/// unmounting under concurrent readers on the rings.
///
/// The rest of the mount tests run on both transports (Scripts/test.sh sets
/// `ENCFS_TEST_TRANSPORT`); these pin the transport themselves.
final class TransportTests: LockTestCase {
    static let parameter = "/sys/module/fuse/parameters/enable_uring"
    /// The user the unprivileged mount runs as.
    static let otherUID = 65534

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard getuid() == 0 else { throw XCTSkip("needs root: the tests switch the fuse module parameter") }
        guard FileManager.default.fileExists(atPath: Self.parameter) else {
            throw XCTSkip("this kernel has no FUSE over io_uring (\(Self.parameter) missing)")
        }
    }

    /// The parameter's value now ("Y" or "N").
    private func parameterValue() throws -> String {
        try String(contentsOfFile: Self.parameter, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sets the parameter for this test and puts the previous value back
    /// at teardown, whatever happens.
    private func setParameter(_ value: String) throws {
        let previous = try parameterValue()
        addTeardownBlock { try? previous.write(toFile: Self.parameter, atomically: false, encoding: .utf8) }
        try value.write(toFile: Self.parameter, atomically: false, encoding: .utf8)
        XCTAssertEqual(try parameterValue(), value)
    }

    /// Reads the large file through the mount (a separate process, page
    /// cache dropped first so that the reads reach the daemon) and checks
    /// every byte.
    private func assertLargeFileReads(_ mounted: MountedBundle, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try python("""
            import os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            got = b''
            while True:
                part = os.read(fd, 65536)
                if not part: break
                got += part
            os.close(fd)
            print('same' if got == open(sys.argv[2], 'rb').read() else 'different')
            """, [mounted.path("docs/large"), "\(source)/docs/large"])
        XCTAssertEqual(result.output, "same\n", result.summary, file: file, line: line)
    }

    private func ringRequests(_ mounted: MountedBundle) throws -> Int {
        try XCTUnwrap(Int(try status(mounted)["ring_requests"] ?? ""), "no ring_requests in status")
    }

    // MARK: - Which transport serves

    func testUring_RingsCarryTheReads() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        XCTAssertEqual(try status(mounted)["transport"], "\"uring\"")
        let before = try ringRequests(mounted)
        try assertLargeFileReads(mounted)
        XCTAssertGreaterThan(try ringRequests(mounted), before, "reads did not go through the rings")
        XCTAssertTrue(mounted.logLines().contains { $0.contains("info: serving through FUSE over io_uring") }, "\(mounted.logLines())")
        let text = try ctl(mounted, ["status"])
        XCTAssertTrue(text.output.contains("transport:    uring ("), text.summary)
    }

    /// Each queue's helper may run on every CPU but its queue's, where the
    /// pinned server and the reader already are: read-ahead it takes over
    /// decrypts on another core (woken by the pinned server, an unpinned
    /// helper was placed beside it).
    func testUring_HelperAvoidsItsQueuesCPU() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        let daemon = try XCTUnwrap(mounted.daemonPID)
        let usable = try allowedCPUs(task: daemon, of: daemon)
        guard usable.count >= 2 else { throw XCTSkip("one CPU: nothing for a helper to avoid") }
        try assertLargeFileReads(mounted)
        // The threads set their affinity as they start; poll a moment.
        // Per pinned server the CPU it is pinned to, per helper the CPUs
        // it may not use: the same lists when each helper avoids its queue's.
        var pinned: [[Int]] = []
        var avoided: [[Int]] = []
        let settled = Deadline.poll(seconds: 10) {
            guard let threads = try? self.ringThreads(of: daemon) else { return false }
            pinned = threads.filter { $0.name == "encfs-ring" }.map { $0.cpus.count == 1 ? $0.cpus.sorted() : [] }
                .sorted { $0.lexicographicallyPrecedes($1) }
            avoided = threads.filter { $0.name == "encfs-ringhelp" }.map { usable.subtracting($0.cpus).sorted() }
                .sorted { $0.lexicographicallyPrecedes($1) }
            return !pinned.isEmpty && pinned == avoided
        }
        XCTAssertTrue(settled, "pinned servers on \(pinned), helpers kept off \(avoided)")
        XCTAssertTrue(avoided.contains { $0.count == 1 }, "no helper avoids a CPU: \(avoided)")
    }

    /// The daemon's ring threads: name and the CPUs each may run on.
    private func ringThreads(of pid: pid_t) throws -> [(name: String, cpus: Set<Int>)] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { tid in
            guard let task = pid_t(tid) else { return nil }
            let name = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard name.hasPrefix("encfs-ring") else { return nil }
            return (name, try allowedCPUs(task: task, of: pid))
        }
    }

    /// `Cpus_allowed_list` of one thread ("0-3,6").
    private func allowedCPUs(task: pid_t, of pid: pid_t) throws -> Set<Int> {
        let status = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") })
        var cpus = Set<Int>()
        for part in line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces).split(separator: ",") {
            let bounds = part.split(separator: "-").compactMap { Int($0) }
            let range = try XCTUnwrap(bounds.first.map { $0...(bounds.last ?? $0) }, "bad CPU list \(line)")
            cpus.formUnion(range)
        }
        return cpus
    }

    func testClassic_RingsStayIdle() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "classic"])
        try assertLargeFileReads(mounted)
        let fields = try status(mounted)
        XCTAssertEqual(fields["transport"], "\"classic\"")
        XCTAssertEqual(fields["ring_requests"], "0")
        XCTAssertFalse(mounted.logLines().contains { $0.contains("io_uring") }, "\(mounted.logLines())")
    }

    /// The rings are opt-in: without --transport the classic loop serves
    /// and io_uring is not even probed.
    func testDefault_IsClassic() throws {
        // Tools.withTestTransport must not choose for this mount.
        let result = try Subprocess.run(try Tools.mount(), [bundle, try scratch.makeDirectory("mnt-default"), "--key-file", key,
                                                            "--log-file", scratch.url("default.log")])
        XCTAssertEqual(result.status, 0, result.summary)
        let mountpoint = scratch.url("mnt-default")
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let mounted = MountedBundle(bundle: bundle, mountpoint: mountpoint, logFile: scratch.url("default.log"), foreground: nil,
                                    daemonPID: ProcessTable.daemon(servingAt: mountpoint), secondsToServe: 0)
        try assertLargeFileReads(mounted)
        XCTAssertEqual(try status(mounted)["transport"], "\"classic\"")
        XCTAssertEqual(try ringRequests(mounted), 0)
        XCTAssertFalse(mounted.logLines().contains { $0.contains("io_uring") }, "\(mounted.logLines())")
    }

    func testOptionSpelling_OTransport() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["-o", "transport=classic"])
        XCTAssertEqual(try status(mounted)["transport"], "\"classic\"")
    }

    /// auto_unmount: served classic (over rings a killed daemon's mount
    /// would stay); uring with it is refused.
    func testAutoUnmount_ServedClassic_UringRefused() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["-o", "auto_unmount"])
        XCTAssertEqual(try status(mounted)["transport"], "\"classic\"")
        let mountpoint = try scratch.makeDirectory("mnt-refused")
        let refused = try Subprocess.run(try Tools.mount(), [bundle, mountpoint, "--key-file", key, "-o", "auto_unmount",
                                                             "--transport", "uring"])
        XCTAssertEqual(refused.status, 2, refused.summary)
        XCTAssertTrue(refused.errorOutput.hasPrefix("encfs-mount: error: --transport uring cannot be used with -o auto_unmount"),
                      refused.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    func testBadTransport_IsUsageError() throws {
        try assertMountOptionRejected("--transport", values: ["tcp", "", "URING"], message: "--transport must be uring or classic")
    }

    // MARK: - The module parameter

    func testRoot_TurnsTheParameterOn_AndSaysSo() throws {
        try setParameter("N")
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        XCTAssertEqual(try parameterValue(), "Y")
        XCTAssertTrue(mounted.logLines().contains {
            $0.contains("info: turned on \(Self.parameter) for FUSE over io_uring (it was off)")
        }, "\(mounted.logLines())")
        try assertLargeFileReads(mounted)
        XCTAssertGreaterThan(try ringRequests(mounted), 0)
    }

    /// A user who may not switch the parameter on: `--transport uring` is
    /// an error, checked before anything is mounted. (Whether that user
    /// could mount at all depends on /dev/fuse's mode; the error comes
    /// first either way.)
    func testParameterOff_NonRoot_UringRequiredFails() throws {
        try setParameter("N")
        // mkdtemp made the scratch directory 0700: let the other user in.
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        XCTAssertEqual(chmod(bundle, 0o644), 0)
        XCTAssertEqual(chmod(key, 0o644), 0)
        let mountpoint = try scratch.makeDirectory("mnt-user")
        XCTAssertEqual(chown(mountpoint, uid_t(Self.otherUID), gid_t(Self.otherUID)), 0)
        let result = try Subprocess.run("setpriv", ["--reuid=\(Self.otherUID)", "--regid=\(Self.otherUID)", "--clear-groups", "--",
                                                    try Tools.mount(), bundle, mountpoint, "--key-file", key, "--transport", "uring"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.summary)
        XCTAssertTrue(result.errorOutput.hasPrefix(
            "encfs-mount: error: --transport uring is not available: \(Self.parameter) is off and only root may turn it on"),
                      result.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
        XCTAssertEqual(try parameterValue(), "N")
    }

    /// io_uring forbidden (`kernel.io_uring_disabled` = 2, restored after):
    /// `--transport uring` is an error and mounts nothing; the default
    /// (classic) serves without a word about io_uring.
    func testIoUringDisabled_DefaultFallsBack_RequiredFails() throws {
        let sysctl = "/proc/sys/kernel/io_uring_disabled"
        guard let previous = try? String(contentsOfFile: sysctl, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
              access(sysctl, W_OK) == 0 else { throw XCTSkip("\(sysctl) cannot be changed here") }
        addTeardownBlock { try? previous.write(toFile: sysctl, atomically: false, encoding: .utf8) }
        try "2".write(toFile: sysctl, atomically: false, encoding: .utf8)

        let mountpoint = try scratch.makeDirectory("mnt-required")
        let required = try Subprocess.run(try Tools.mount(), [bundle, mountpoint, "--key-file", key, "--transport", "uring"])
        XCTAssertEqual(required.status, 1, required.summary)
        XCTAssertEqual(required.errorLines.count, 1, required.summary)
        XCTAssertTrue(required.errorOutput.hasPrefix(
            "encfs-mount: error: --transport uring is not available: io_uring refused: Operation not permitted"), required.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint))

        let log = scratch.url("fallback.log")
        let fallback = try scratch.makeDirectory("mnt-fallback")
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: fallback, foreground: nil) }
        let result = try Subprocess.run(try Tools.mount(), [bundle, fallback, "--key-file", key, "--log-file", log])
        XCTAssertEqual(result.status, 0, result.summary)
        let mounted = MountedBundle(bundle: bundle, mountpoint: fallback, logFile: log, foreground: nil,
                                    daemonPID: ProcessTable.daemon(servingAt: fallback), secondsToServe: 0)
        XCTAssertFalse(mounted.logLines().contains { $0.contains("io_uring") }, "\(mounted.logLines())")
        try assertLargeFileReads(mounted)
        XCTAssertEqual(try status(mounted)["transport"], "\"classic\"")
    }

    // MARK: - Lock and unmount on the rings

    func testLock_OnRings_AnswersENOKEY_UnlockServesAgain() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring", "--protection", "complete"])
        XCTAssertEqual(try tryRead(mounted, "small"), "ok 11")
        XCTAssertEqual(try ctl(mounted, ["lock"]).status, 0)
        let before = try ringRequests(mounted)
        XCTAssertEqual(try tryRead(mounted, "small"), "ENOKEY")
        XCTAssertGreaterThan(try ringRequests(mounted), before, "the refused open did not go through a ring")
        XCTAssertEqual(try ctl(mounted, ["unlock", "--key-file", key]).status, 0)
        try assertLargeFileReads(mounted)
    }

    /// Reads decrypt into the ring entries' buffers; a lock wipes them
    /// there too, like the classic reply buffers.
    func testLock_WipesPlaintextFromRingEntries() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring", "--protection", "complete"])
        let pid = try XCTUnwrap(mounted.daemonPID)
        let plaintext = try XCTUnwrap(FileManager.default.contents(atPath: "\(source)/docs/large"))
        let needle = Array(plaintext[1000..<1096])
        try assertLargeFileReads(mounted)
        XCTAssertGreaterThan(try ringRequests(mounted), 0)
        // The control: the reply is in the daemon's memory while unlocked.
        XCTAssertTrue(try memory(of: pid, contains: needle), "the search does not find the plaintext while unlocked")
        XCTAssertEqual(try ctl(mounted, ["lock"]).status, 0)
        XCTAssertFalse(try memory(of: pid, contains: needle), "plaintext left in the daemon's memory after lock")
    }

    /// Four readers hammer the mount through the rings; a lazy unmount
    /// detaches it, the readers finish, and the daemon (its ring threads
    /// included) exits cleanly once the last file is closed.
    func testLazyUnmount_UnderConcurrentRingReads_DaemonExitsCleanly() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        let daemon = try XCTUnwrap(mounted.daemonPID)
        let reader = """
            import mmap, os, random, select, sys
            # O_DIRECT: every read is a request, none is served from the
            # page cache.
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
            want = open(sys.argv[2], 'rb').read()
            buffer = mmap.mmap(-1, 4096)
            print('reading', flush=True)
            wrong = reads = 0
            # Until the test writes a line: 200 random 4 KiB reads at a time.
            while not select.select([sys.stdin], [], [], 0)[0]:
                for _ in range(200):
                    off = random.randrange(0, (len(want) - 4096) // 4096) * 4096
                    got = os.preadv(fd, [buffer], off)
                    if buffer[:got] != want[off:off + got]: wrong += 1
                    reads += 1
            print('reads=%d wrong=%d' % (reads, wrong), flush=True)
            """
        var readers: [SpawnedProcess] = []
        for _ in 0..<4 {
            let process = try SpawnedProcess(Tools.python, ["-c", reader, mounted.path("docs/large"), "\(source)/docs/large"],
                                             feedStandardInput: true)
            addTeardownBlock {
                process.signal(SIGKILL)
                _ = process.wait(deadline: Deadline(seconds: 5))
            }
            readers.append(process)
        }
        for process in readers { XCTAssertEqual(process.readLine(deadline: Deadline(seconds: 30)), "reading") }
        let before = try ringRequests(mounted)
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.ringRequests(mounted)) ?? 0) > before + 1000 },
                      "the readers' requests did not reach the rings")
        try check(Tools.fusermount, ["-uz", mounted.mountpoint])
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
        for process in readers {
            process.write("stop\n")
            let summary = process.readLine(deadline: Deadline(seconds: 30)) ?? "(no summary)"
            XCTAssertTrue(summary.hasSuffix(" wrong=0"), summary)
            XCTAssertEqual(process.wait(deadline: Deadline(seconds: 30)), ExitStatus(code: 0, signal: nil))
        }
        XCTAssertTrue(Deadline.poll(seconds: 20) { !ProcessTable.isAlive(daemon) }, "daemon outlived its last reader")
        XCTAssertTrue(mounted.logLines().last?.contains("info: unmounted") ?? false, "\(mounted.logLines())")
        XCTAssertEqual(mounted.logLines().filter { !$0.contains(" info: ") }, [])
    }
}
