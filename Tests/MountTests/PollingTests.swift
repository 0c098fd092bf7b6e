import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `--poll-us N`: with one reader at a time the daemon finds requests by
/// polling (encfs-ctl status counts them), never with `--poll-us 0`; an
/// idle polling mount burns no CPU; a signal, an unmount or a lock ends or
/// interrupts a daemon whose worker or ring server is polling; bad values
/// are refused.
///
/// These run on the transport the suite runs on (`ENCFS_TEST_TRANSPORT`,
/// set by Scripts/test.sh once per transport; encfs-mount's default
/// without it), giving `--poll-us` (the rings poll only when it is given);
/// the `testUring_` ones pin the rings, so that a run of the classic suite
/// covers ring polling too.
final class PollingTests: LockTestCase {
    /// Reads FILE's 4 KiB blocks one at a time with O_DIRECT (each read
    /// reaches the daemon) until COUNT reads are done or, when COUNT is 0,
    /// until the file STOP exists; checks each against EXPECTED and prints
    /// "ok N bad M" at the end.
    static let reader = #"""
    import mmap, os, sys
    path, count, expected, stop = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read(), sys.argv[4]
    blocks = len(expected) // 4096
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    ok = bad = i = 0
    while (count == 0 and not (i % 100 == 0 and os.path.exists(stop))) or i < count:
        off = (i * 7 % blocks) * 4096
        n = os.preadv(fd, [buf], off)
        if n == 4096 and buf[:n] == expected[off:off + n]: ok += 1
        else: bad += 1
        i += 1
    print("ok", ok, "bad", bad)
    """#

    private func polledRequests(_ mounted: MountedBundle) throws -> Int {
        try XCTUnwrap(Int(try status(mounted)["polled_requests"] ?? ""), "no polled_requests in status")
    }

    /// Runs the reader for `count` reads and requires every byte right.
    private func readOneAtATime(_ mounted: MountedBundle, count: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try python(Self.reader, [mounted.path("docs/large"), String(count), "\(source)/docs/large", "/nonexistent"])
        XCTAssertEqual(result.output, "ok \(count) bad 0\n", result.summary, file: file, line: line)
    }

    /// Starts the reader with no end (it stops when its stop file appears).
    private func startReader(_ mounted: MountedBundle) throws -> (SpawnedProcess, stop: String) {
        let stop = scratch.url(uniqueName("stop-reader"))
        let reader = try SpawnedProcess(Tools.python, ["-c", Self.reader, mounted.path("docs/large"), "0", "\(source)/docs/large", stop])
        addTeardownBlock {
            reader.signal(SIGKILL)
            _ = reader.wait(deadline: Deadline(seconds: 10))
        }
        return (reader, stop)
    }

    /// Has the reader stop and requires that every read it made was right.
    private func stopReader(_ reader: SpawnedProcess, stop: String, file: StaticString = #filePath, line: UInt = #line) throws {
        _ = try scratch.write(URL(fileURLWithPath: stop).lastPathComponent, [])
        XCTAssertEqual(reader.wait(deadline: Deadline(seconds: 30)), ExitStatus(code: 0, signal: nil), file: file, line: line)
        let summary = reader.readLine(deadline: Deadline(seconds: 5)) ?? ""
        XCTAssertTrue(summary.hasPrefix("ok ") && summary.hasSuffix(" bad 0"), summary, file: file, line: line)
    }

    /// Reads one block at a time until the daemon has found `count`
    /// requests by polling (within 60 s: a worker whose CPU others want
    /// backs off for a while, so a busy machine takes longer).
    private func readUntilPolled(_ mounted: MountedBundle, count: Int = 1, file: StaticString = #filePath, line: UInt = #line) throws {
        let (reader, stop) = try startReader(mounted)
        XCTAssertTrue(Deadline.poll(seconds: 60, interval: 0.1) { ((try? self.polledRequests(mounted)) ?? 0) >= count },
                      "no request was found by polling", file: file, line: line)
        try stopReader(reader, stop: stop, file: file, line: line)
    }

    /// The daemon's CPU time so far (user + system), in clock ticks.
    private func cpuTicks(_ pid: pid_t) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name, which is in parentheses: state is
        // field 3, utime 14 and stime 15.
        let fields = try XCTUnwrap(stat.split(separator: ")").last).split(separator: " ")
        return try XCTUnwrap(Int(fields[11])) + XCTUnwrap(Int(fields[12]))
    }

    func testOneReader_RequestsFoundByPolling() throws {
        // A long window, so that a busy machine still has reads arrive
        // inside it.
        let mounted = try mount(bundle, keyFile: key, options: ["--poll-us", "1000"])
        XCTAssertEqual(try polledRequests(mounted), 0)
        try readUntilPolled(mounted)
        let text = try ctl(mounted, ["status"])
        XCTAssertTrue(text.output.contains("found by polling)"), text.summary)
        if let transport = Tools.testTransport {
            XCTAssertEqual(try status(mounted)["transport"], "\"\(transport)\"")
        }
    }

    func testPollUsZero_NeverPolls() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--poll-us", "0"])
        try readOneAtATime(mounted, count: 3000)
        XCTAssertEqual(try polledRequests(mounted), 0)
    }

    /// Skips where the kernel has no FUSE over io_uring.
    private func requireRings() throws {
        guard FileManager.default.fileExists(atPath: "/sys/module/fuse/parameters/enable_uring") else {
            throw XCTSkip("this kernel has no FUSE over io_uring")
        }
    }

    /// The ring servers poll too: a lone reader's requests are found by
    /// polling, and only ring requests were served (the classic loop,
    /// which would also count, carried none of the reads).
    func testUring_OneReader_RequestsFoundByPolling() throws {
        try requireRings()
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring", "--poll-us", "1000"])
        XCTAssertEqual(try status(mounted)["transport"], "\"uring\"")
        XCTAssertEqual(try polledRequests(mounted), 0)
        let ringsBefore = try XCTUnwrap(Int(try status(mounted)["ring_requests"] ?? ""))
        try readUntilPolled(mounted)
        let rings = try XCTUnwrap(Int(try status(mounted)["ring_requests"] ?? "")) - ringsBefore
        XCTAssertGreaterThanOrEqual(rings, try polledRequests(mounted), "more requests found by polling than the rings served")
    }

    func testUring_PollUsZero_NeverPolls() throws {
        try requireRings()
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring", "--poll-us", "0"])
        try readOneAtATime(mounted, count: 3000)
        XCTAssertEqual(try polledRequests(mounted), 0)
        XCTAssertGreaterThan(try XCTUnwrap(Int(try status(mounted)["ring_requests"] ?? "")), 0)
    }

    /// Without `--poll-us` the rings do not poll (the classic loop would,
    /// at the default window).
    func testUring_WithoutPollUs_NeverPolls() throws {
        try requireRings()
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        try readOneAtATime(mounted, count: 3000)
        XCTAssertEqual(try polledRequests(mounted), 0)
        XCTAssertGreaterThan(try XCTUnwrap(Int(try status(mounted)["ring_requests"] ?? "")), 0)
    }

    /// SIGTERM while a ring server polls for a lone reader: the mount
    /// ends cleanly (the stop reaches the polling server through its ring).
    func testUring_SIGTERM_WhilePolling_EndsCleanly() throws {
        try requireRings()
        try checkSignalWhilePolling(SIGTERM, transport: ["--transport", "uring"])
    }

    /// An idle ring mount after polling sleeps (as ``testIdleMount_BurnsNoCPU``).
    func testUring_IdleMount_BurnsNoCPU() throws {
        try requireRings()
        try checkIdleAfterPolling(transport: ["--transport", "uring"])
    }

    /// Concurrent readers get every byte right while the loop switches
    /// between polling and all workers reading.
    func testConcurrentReaders_AfterOneReader_ReadCorrectly() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--poll-us", "1000"])
        try readUntilPolled(mounted)
        let readers = try (0..<4).map { _ in
            try SpawnedProcess(Tools.python, ["-c", Self.reader, mounted.path("docs/large"), "1500", "\(source)/docs/large", "/nonexistent"])
        }
        for reader in readers {
            XCTAssertEqual(reader.wait(deadline: Deadline(seconds: 60)), ExitStatus(code: 0, signal: nil))
            XCTAssertEqual(reader.readLine(deadline: Deadline(seconds: 5)), "ok 1500 bad 0")
        }
        try readOneAtATime(mounted, count: 1000)
    }

    /// After reads that made its worker poll, an idle daemon sleeps: its
    /// CPU time over two seconds stays far below the two seconds a worker
    /// still polling would take.
    func testIdleMount_BurnsNoCPU() throws {
        try checkIdleAfterPolling()
    }

    private func checkIdleAfterPolling(transport: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        let mounted = try mount(bundle, keyFile: key, options: transport + ["--poll-us", "1000"])
        let pid = try XCTUnwrap(mounted.daemonPID)
        try readUntilPolled(mounted)
        usleep(200_000)
        let before = try cpuTicks(pid)
        sleep(2)
        let used = try cpuTicks(pid) - before
        let ticksPerSecond = sysconf(Int32(_SC_CLK_TCK))
        XCTAssertLessThan(used, ticksPerSecond / 2, "an idle mount used \(used) ticks in 2 s", file: file, line: line)
    }

    /// SIGTERM, SIGINT or SIGHUP while one reader keeps the worker polling:
    /// the mount ends cleanly.
    private func checkSignalWhilePolling(_ signal: Int32, transport: [String] = [], file: StaticString = #filePath,
                                         line: UInt = #line) throws {
        let mounted = try mount(bundle, keyFile: key, options: transport + ["--poll-us", "1000"], foreground: true)
        let process = try XCTUnwrap(mounted.foreground)
        _ = try startReader(mounted)
        XCTAssertTrue(Deadline.poll(seconds: 60, interval: 0.1) { ((try? self.polledRequests(mounted)) ?? 0) > 0 },
                      "the worker never polled", file: file, line: line)
        process.signal(signal)
        XCTAssertEqual(process.wait(deadline: Deadline(seconds: 20)), ExitStatus(code: 0, signal: nil), "signal \(signal)",
                       file: file, line: line)
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint), file: file, line: line)
    }

    func testSIGTERM_WhilePolling_EndsCleanly() throws {
        try checkSignalWhilePolling(SIGTERM)
    }

    func testSIGINT_WhilePolling_EndsCleanly() throws {
        try checkSignalWhilePolling(SIGINT)
    }

    func testSIGHUP_WhilePolling_EndsCleanly() throws {
        try checkSignalWhilePolling(SIGHUP)
    }

    /// `fusermount3 -u` right after reads that made the worker poll (the
    /// leader then sleeps in the kernel, and ENODEV ends it).
    func testUnmount_AfterPolling_EndsDaemon() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--poll-us", "1000"], foreground: true)
        let process = try XCTUnwrap(mounted.foreground)
        try readUntilPolled(mounted)
        try check(Tools.fusermount, ["-u", mounted.mountpoint])
        XCTAssertEqual(process.wait(deadline: Deadline(seconds: 20)), ExitStatus(code: 0, signal: nil))
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint))
    }

    /// A lock after the worker polled: reads fail with ENOKEY, an unlock
    /// serves them again (the same workers and their scratch).
    func testLockAndUnlock_AfterPolling() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--poll-us", "1000",
                                                                "--protection", "complete"])
        try readUntilPolled(mounted)
        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertEqual(try tryRead(mounted, "docs/large"), "ENOKEY")
        assertSuccess(try ctl(mounted, ["unlock", "--key-file", key]))
        try readOneAtATime(mounted, count: 1000)
    }

    func testPollUs_RejectsOutOfRange() throws {
        try assertMountOptionRejected("--poll-us", values: ["-1", "1001", "fifty", ""],
                                      message: "--poll-us must be a number of microseconds from 0 to 1000")
    }
}
