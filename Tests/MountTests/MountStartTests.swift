import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// How the background mount starts: two processes (the command, then the
/// daemon it executes again), each of which would otherwise pay the
/// dynamic loader for a dozen Swift runtime libraries. encfs-mount links
/// the Swift runtime in (Package.swift); the daemon keeps its identity.
/// The daemon starts while the command unlocks the header, and a FUSE
/// ring's reply buffers are locked as they are first touched.
final class MountStartTests: ToolTestCase {
    /// The Swift runtime libraries the dynamic loader maps into a program
    /// linked against them; none may appear in the daemon.
    private static let swiftRuntimeLibraries = ["libswiftCore.so", "libswift_Concurrency.so", "libswiftDispatch.so",
                                                "libswift_StringProcessing.so", "libswiftGlibc.so"]

    /// The daemon maps no Swift runtime library: it is linked in, so
    /// neither process of a mount resolves them at start.
    func testDaemon_MapsNoSwiftRuntimeLibrary() throws {
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("content\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("d.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        let pid = try XCTUnwrap(mounted.daemonPID)
        // Read by cat: Foundation stops early on /proc files (size 0).
        let maps = try check("cat", ["/proc/\(pid)/maps"]).output
        // The check sees libraries at all: libc is always mapped.
        XCTAssertTrue(maps.contains("libc.so"), "no libc in the daemon's maps:\n\(maps)")
        for library in Self.swiftRuntimeLibraries {
            XCTAssertFalse(maps.contains(library), "the daemon maps \(library)")
        }
        XCTAssertEqual(String(decoding: try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/comm")), as: UTF8.self),
                       "encfs-mount\n")
        XCTAssertEqual(try String(contentsOf: URL(fileURLWithPath: mounted.mountpoint + "/file"), encoding: .utf8), "content\n")
    }

    /// The daemon is started before the header is unlocked (its start runs
    /// beside the unlock), and a failed unlock ends it without a trace: no
    /// process left, no mount, nothing logged. A wrong passphrase keeps
    /// the command in scrypt long enough to see the waiting daemon.
    func testFailedUnlock_DaemonStartedEarlyEndsWithoutTrace() throws {
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("content\n".utf8))
        let passphraseFile = try scratch.write("passphrase", Array("right passphrase\n".utf8), mode: 0o600)
        let bundle = scratch.url("p.encfs")
        let packed = try pack(source, bundle, ["--passphrase-file", passphraseFile, "--scrypt-log-n", "18", "-q"])
        XCTAssertEqual(packed.status, 0, packed.summary)
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let log = scratch.url("failed.log")
        let command = try SpawnedProcess(try Tools.mount(), [bundle, mnt, "--log-file", log],
                                         environment: ["ENCFS_PASSPHRASE": "wrong passphrase"], captureStandardError: true)
        var daemon: pid_t?
        // Bounded: the command's scrypt (2^18, 256 MiB) outlasts the daemon's start.
        _ = Deadline.poll(seconds: 60, interval: 0.001) {
            daemon = ProcessTable.daemon(servingAt: mnt)
            return daemon != nil || !command.isRunning
        }
        let (_, stderr, timedOut) = command.drain(deadline: Deadline(seconds: 120))
        XCTAssertFalse(timedOut)
        XCTAssertEqual(command.wait(deadline: Deadline(seconds: 10)), ExitStatus(code: 1, signal: nil))
        XCTAssertTrue(String(decoding: stderr, as: UTF8.self).hasPrefix("encfs-mount: error: wrong key"),
                      String(decoding: stderr, as: UTF8.self))
        let started = try XCTUnwrap(daemon, "no daemon while the command unlocked the header")
        XCTAssertFalse(ProcessTable.isAlive(started), "the daemon outlived the failed unlock")
        XCTAssertNil(ProcessTable.daemon(servingAt: mnt))
        XCTAssertFalse(MountTable.isMounted(mnt))
        let logged = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertEqual(logged, "", "the abandoned daemon logged")
    }

    /// Over io_uring, every ring entry's reply buffer is locked, page by
    /// page as replies first touch it (`lf` with `lo` in smaps): locking
    /// them whole at INIT delayed every mount's first answer.
    func testRingReplyBuffers_LockedOnFault() throws {
        let parameter = "/sys/module/fuse/parameters/enable_uring"
        guard getuid() == 0, FileManager.default.fileExists(atPath: parameter) else {
            throw XCTSkip("needs root and a kernel with FUSE over io_uring")
        }
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", (0..<(200 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let key = try makeKeyFile()
        let bundle = scratch.url("d.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let mounted = try mount(bundle, keyFile: key, options: ["--transport", "uring"])
        defer { unmount(mounted) }
        let pid = try XCTUnwrap(mounted.daemonPID)
        let cmp = try run("cmp", ["\(source)/file", mounted.path("file")])
        XCTAssertEqual(cmp.status, 0, cmp.summary)
        // One smaps block per mapping: Size and Locked (kB) come before
        // VmFlags. OpenSSL's secure heap is locked on fault too (256 KiB).
        let smaps = try check("cat", ["/proc/\(pid)/smaps"]).output
        var size = 0
        var locked = 0
        var onFaultSize = 0
        var onFaultLocked = 0
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if line.hasPrefix("Size:") { size = Int(fields.dropFirst().first ?? "") ?? 0 }
            if line.hasPrefix("Locked:") { locked = Int(fields.dropFirst().first ?? "") ?? 0 }
            if line.hasPrefix("VmFlags:"), fields.contains("lf") {
                XCTAssertTrue(fields.contains("lo"), "a lock-on-fault mapping that is not locked: \(line)")
                onFaultSize += size
                onFaultLocked += locked
            }
        }
        let cpus = try String(contentsOfFile: "/sys/devices/system/cpu/possible", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
            .compactMap { $0.split(separator: "-").last.flatMap { Int($0) } }.max().map { $0 + 1 } ?? 0
        // Four entries per possible CPU (FUSETransport.entriesPerQueue),
        // 256 KiB of reply buffer each (MountContext.maximumRead).
        XCTAssertGreaterThanOrEqual(onFaultSize, 4 * cpus * 256, "ring reply buffers not locked on fault:\n\(smaps)")
        // The 200 KiB read's reply pages were touched, and so are locked.
        XCTAssertGreaterThanOrEqual(onFaultLocked, 192, "ring reply pages not locked after a read:\n\(smaps)")
    }
}
