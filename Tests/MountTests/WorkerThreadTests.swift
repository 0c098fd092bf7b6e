import SharedTestSupport
import XCTest

/// `encfs-mount --threads N`: the daemon serves with N libfuse workers,
/// starts them on demand, and keeps every one it started (a worker ended
/// and re-created under load costs its scratch and key derivations again).
final class WorkerThreadTests: ToolTestCase {
    /// Reads random 4 KiB blocks of FILE from 8 threads for SECONDS and
    /// prints how many reads returned the expected bytes and how many not.
    static let load = #"""
    import os, random, sys, threading
    path, seconds, expected = sys.argv[1], float(sys.argv[2]), open(sys.argv[3], "rb").read()
    import time
    stop = time.monotonic() + seconds
    counts = [0, 0]
    lock = threading.Lock()
    def work(seed):
        rng = random.Random(seed)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = __import__("mmap").mmap(-1, 4096)
        ok = bad = 0
        while time.monotonic() < stop:
            off = rng.randrange(len(expected) // 4096) * 4096
            n = os.preadv(fd, [buf], off)
            if buf[:n] == expected[off:off + n] and n == 4096: ok += 1
            else: bad += 1
        os.close(fd)
        with lock:
            counts[0] += ok; counts[1] += bad
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(counts[0], counts[1])
    """#

    /// The daemon's threads but its control thread (the socket of
    /// `encfs-ctl`, which every mount has when run as root).
    private func threadIDs(_ pid: pid_t) throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").filter { task in
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            return name.trimmingCharacters(in: .whitespacesAndNewlines) != "encfs-control"
        })
    }

    private func mountLoaded(threads: String?, transport: String = "classic") throws -> (MountedBundle, pid_t, String) {
        let source = scratch.url("src")
        try check("mkdir", [source])
        try check("sh", ["-c", "head -c 4194304 /dev/urandom > \"$1\"", "sh", "\(source)/data.bin"])
        let key = try makeKeyFile()
        let bundle = scratch.url("threads.encfs")
        _ = try packOrThrow(source, bundle, keyFile: key)
        // libfuse's workers: the classic transport (beside the rings the
        // classic loop keeps two at most, see testUring_RingThreads…).
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", transport] + (threads.map { ["--threads", $0] } ?? []))
        let pid = try XCTUnwrap(mounted.daemonPID)
        return (mounted, pid, "\(source)/data.bin")
    }

    private func runLoad(_ mounted: MountedBundle, expected: String) throws {
        let result = try python(Self.load, [mounted.path("data.bin"), "1.5", expected])
        let counts = result.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertEqual(counts.count, 2, result.summary)
        XCTAssertGreaterThan(counts.first ?? 0, 100, result.summary)
        XCTAssertEqual(counts.last ?? -1, 0, "reads returned wrong bytes: \(result.summary)")
    }

    func testThreadsOption_ServesWithExactlyThatManyWorkersAndKeepsThem() throws {
        let (mounted, pid, expected) = try mountLoaded(threads: "3")
        try runLoad(mounted, expected: expected)
        let afterFirst = try threadIDs(pid)
        // Main thread + 3 workers: eight concurrent readers needed them all.
        XCTAssertEqual(afterFirst.count, 4, "\(afterFirst)")
        try runLoad(mounted, expected: expected)
        XCTAssertEqual(try threadIDs(pid), afterFirst, "a worker was ended and re-created under load")
    }

    func testDefaultThreads_TwoPerCPUAtLeastFour() throws {
        let (mounted, pid, expected) = try mountLoaded(threads: nil)
        try runLoad(mounted, expected: expected)
        let cpus = ProcessInfo.processInfo.activeProcessorCount
        let expectedWorkers = min(64, max(4, 2 * cpus))
        let ids = try threadIDs(pid)
        // Eight readers start at most eight workers.
        XCTAssertEqual(ids.count, 1 + min(expectedWorkers, 8), "\(ids)")
        try runLoad(mounted, expected: expected)
        XCTAssertEqual(try threadIDs(pid), ids, "a worker was ended and re-created under load")
    }

    /// Over io_uring: one pinned thread and one helper (each with its own
    /// ring) per possible CPU, all kept under load, and the classic loop
    /// beside them with two workers at most (it serves only what still
    /// comes through /dev/fuse).
    func testUring_RingThreadsPerCPU_KeptUnderLoad() throws {
        let (mounted, pid, expected) = try mountLoaded(threads: nil, transport: "uring")
        try runLoad(mounted, expected: expected)
        func names() throws -> [String: Int] {
            var counts: [String: Int] = [:]
            for task in try threadIDs(pid) {
                let name = try String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
                counts[name.trimmingCharacters(in: .whitespacesAndNewlines), default: 0] += 1
            }
            return counts
        }
        let possible = try String(contentsOfFile: "/sys/devices/system/cpu/possible", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
            .compactMap { $0.split(separator: "-").last.flatMap { Int($0) } }.max().map { $0 + 1 } ?? 0
        let counts = try names()
        XCTAssertEqual(counts["encfs-ring"], possible, "\(counts)")
        XCTAssertEqual(counts["encfs-ringhelp"], possible, "\(counts)")
        XCTAssertLessThanOrEqual(counts["encfs-mount"] ?? 0, 3, "main thread and at most two classic workers: \(counts)")
        let ids = try threadIDs(pid)
        try runLoad(mounted, expected: expected)
        XCTAssertEqual(try threadIDs(pid), ids, "a thread was ended and re-created under load")
    }

    func testThreadsOption_RejectsOutOfRange() throws {
        try assertMountOptionRejected("--threads", values: ["0", "65", "four", ""],
                                      message: "--threads must be a number from 1 to 64")
    }
}
