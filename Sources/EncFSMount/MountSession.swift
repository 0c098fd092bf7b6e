import EncFSCore
import CFuse
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// One FUSE mount of a bundle: session setup, the multithreaded loop, and
/// a clean unmount.
///
/// The session holds the `MountContext` retained for its whole life and
/// hands it to libfuse as `userdata`; callbacks recover it with
/// `fuse_req_userdata`.
package final class MountSession {
    private let context: MountContext
    private let mountpoint: [UInt8]
    private var session: OpaquePointer?
    private var ops: fuse_lowlevel_ops
    private var mounted = false

    /// Worker threads serving one mount unless `--threads` says otherwise:
    /// two per online CPU, at least 4.
    ///
    /// On 2 CPUs, 4 threads served 4 KiB random reads at least as well as 8
    /// or 16, and sequential reads the same. What the thread count changes
    /// is where the woken worker runs: a wake-up across CPUs is far dearer
    /// than the read itself on virtual machines that halt idle CPUs at
    /// once, and fewer workers landed on the reader's CPU more often. More
    /// threads help when reads wait on a slow disk, hence the option
    /// (figures: docs/PERFORMANCE.md, "Why the code is the way it is").
    package static var defaultThreads: Int {
        min(maximumThreads, max(4, 2 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
    }
    /// Most worker threads `--threads` accepts.
    package static let maximumThreads = 64
    /// Worker threads for this mount; all stay alive once started.
    private let threads: Int
    /// The transport asked for (`--transport`), decided at ``serve(readaheadKB:mounted:)``.
    private let transportRequest: TransportRequest
    /// The classic loop's polling window in microseconds (`--poll-us`),
    /// 0 when it does not poll (``RequestPoller``).
    private let pollMicroseconds: Int
    /// The rings' polling window (`--poll-us` when given), 0 when they do
    /// not poll.
    private let ringPollMicroseconds: Int
    /// Why this mount must be served classic, if it must
    /// (``classicReason(autoUnmount:waitsOnNetwork:)``).
    private let classicReason: String?
    /// `-o auto_unmount` was asked for.
    private let autoUnmount: Bool
    /// Under `-o auto_unmount`, a copy of the mount's /dev/fuse descriptor
    /// numbered above every other (``deviceCopyReleasedFirst(of:)``).
    private var autoUnmountDevice: FileDescriptor?

    /// Why a mount cannot be served over io_uring, or nil when it can.
    ///
    /// - Parameters:
    ///   - autoUnmount: `-o auto_unmount`. fusermount3 unmounts a dead
    ///     daemon's mount only when opening it fails with ENOTCONN; over
    ///     io_uring a request sent right after the daemon was killed fails
    ///     with ECANCELED instead (the kernel aborts the connection only
    ///     once the dead rings are torn down), and the mount stays.
    ///   - waitsOnNetwork: a remote bundle. A ring thread answers one
    ///     request at a time and the kernel queues a CPU's requests on that
    ///     CPU's ring, so reads waiting on a stalled server would hold the
    ///     rings and with them `ls` of cached directories; the classic
    ///     loop's worker pool keeps two workers free of the network.
    package static func classicReason(autoUnmount: Bool, waitsOnNetwork: Bool) -> String? {
        if waitsOnNetwork {
            return "a remote bundle needs it (reads waiting on a stalled server would hold the io_uring queues)"
        }
        if autoUnmount { return "auto_unmount needs it (a killed daemon's rings would keep fusermount3 from unmounting)" }
        return nil
    }

    /// Options always passed to the kernel: read-only, no set-id programs
    /// and no device files, permission checks by the kernel from the stored
    /// mode bits, and reads of at most ``MountContext/maximumRead``.
    static let baseOptions = ["ro", "nosuid", "nodev", "default_permissions", "max_read=\(MountContext.maximumRead)",
                              "subtype=encfs"]

    /// Options accepted from the user but never applied: they would undo
    /// `nosuid` and `nodev` (libfuse honours the last of a pair). Debian's
    /// `mount.fuse3` adds both to every fstab mount, so refusing them
    /// would break fstab; the mount stays `nosuid,nodev` whatever is asked.
    static let ignoredOptions: Set<String> = ["suid", "dev"]

    /// The `-o` string for libfuse: ``baseOptions``, the file system name,
    /// then `extra` without ``ignoredOptions``.
    ///
    /// - Parameters:
    ///   - bundlePath: shown as the source (`fsname`); commas, the option
    ///     separator, become underscores.
    ///   - extra: the user's options (comma-separated parts).
    static func kernelOptions(bundlePath: [UInt8], extra: [String]) -> String {
        let fsname = String(decoding: bundlePath.map { $0 == UInt8(ascii: ",") ? UInt8(ascii: "_") : $0 }, as: UTF8.self)
        let kept = extra.flatMap { $0.split(separator: ",").map(String.init) }.filter { !ignoredOptions.contains($0) }
        return (baseOptions + ["fsname=encfs:\(fsname)"] + kept).joined(separator: ",")
    }

    /// Prepares a session that never locks and has no control socket.
    ///
    /// - Parameters:
    ///   - reader: the opened bundle.
    ///   - bundlePath: shown as the file system source (`fsname`).
    ///   - mountpoint: an existing directory.
    ///   - extraOptions: `-o` options from the user (comma-separated parts);
    ///     `suid` and `dev` are ignored (see ``ignoredOptions``).
    ///   - logger: where errors are logged.
    ///   - threads: worker threads, 1 … ``maximumThreads``.
    ///   - logNames: whether log lines may name entries (names are secret).
    ///   - accessRules: who may open (``AccessRules``); the caller adds
    ///     `allow_other` to `extraOptions` when they need it.
    /// - Throws: `BundleError.io` when libfuse rejects the options.
    package convenience init(reader: BundleReader, bundlePath: [UInt8], mountpoint: [UInt8], extraOptions: [String],
                            logger: MountLogger, threads: Int = MountSession.defaultThreads, logNames: Bool = false,
                            accessRules: AccessRules = AccessRules()) throws {
        try self.init(reader: ReaderHandoff(reader), source: reader.source, options: OpenOptions(), lock: LockSettings(),
                      bundlePath: bundlePath, mountpoint: mountpoint, extraOptions: extraOptions, logger: logger,
                      threads: threads, logNames: logNames, accessRules: accessRules)
    }

    /// Prepares a session that may lock (``LockSettings``).
    ///
    /// - Parameters:
    ///   - reader: the opened bundle (nil inside to start locked), taken
    ///     out so that the mount holds the only reference.
    ///   - source: the bundle's bytes, opened again at each unlock.
    ///   - options: how an unlock opens it (origin, symlinks, scrypt).
    ///   - lock: the protection class, idle lock and control directory.
    ///   - The rest as in ``init(reader:bundlePath:mountpoint:extraOptions:logger:threads:logNames:accessRules:)``.
    package init(reader: ReaderHandoff, source: any ByteSource, options: OpenOptions, lock: LockSettings, bundlePath: [UInt8],
                 mountpoint: [UInt8], extraOptions: [String], logger: MountLogger,
                 threads: Int = MountSession.defaultThreads, logNames: Bool = false,
                 indexCacheBytes: Int = IndexPages.defaultCacheBytes, accessRules: AccessRules = AccessRules(),
                 transport: TransportRequest = .automatic, waitsOnNetwork: Bool = false, pollMicroseconds: Int = 0,
                 ringPollMicroseconds: Int = 0) throws {
        precondition((1...Self.maximumThreads).contains(threads), "internal error: \(threads) worker threads")
        self.threads = threads
        // Reads waiting on a network would hold the one polling worker.
        self.pollMicroseconds = waitsOnNetwork ? 0 : pollMicroseconds
        self.ringPollMicroseconds = waitsOnNetwork ? 0 : ringPollMicroseconds
        transportRequest = transport
        let autoUnmount = extraOptions.flatMap { $0.split(separator: ",") }.contains("auto_unmount")
        self.autoUnmount = autoUnmount
        classicReason = Self.classicReason(autoUnmount: autoUnmount, waitsOnNetwork: waitsOnNetwork)
        let bundle = LockableBundle(reader: reader.take(), source: source, options: options, indexCacheBytes: indexCacheBytes)
        // A remote bundle's --prefetch-list starts now, in the background.
        if let recording = source as? AccessRecordingSource { _ = bundle.withReader { recording.startPrefetch(with: $0) } }
        context = MountContext(bundle: bundle, lockSettings: lock, logger: logger, logNames: logNames, accessRules: accessRules,
                               autoUnmount: autoUnmount)
        self.mountpoint = mountpoint
        ops = FUSEOperations.assignOperations()
        let argv = ["encfs-mount", "-o", Self.kernelOptions(bundlePath: bundlePath, extra: extraOptions)]
        var cStrings = argv.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        let created: OpaquePointer? = cStrings.withUnsafeMutableBufferPointer { buffer in
            var args = fuse_args(argc: Int32(buffer.count), argv: buffer.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size,
                                    Unmanaged.passUnretained(context).toOpaque())
        }
        guard let created else {
            throw BundleError.io(errno: EINVAL, operation: "create FUSE session (check -o options)", path: [])
        }
        session = created
    }

    deinit {
        if let session {
            if mounted { fuse_session_unmount(session) }
            fuse_session_destroy(session)
        }
    }

    /// Mounts at the mountpoint; requests queue in the kernel until ``run()``.
    ///
    /// - Throws: `BundleError.io` naming the mountpoint.
    package func mount() throws {
        guard let session else { return }
        let rc = mountpoint.withCString { fuse_session_mount(session, $0) }
        guard rc == 0 else { throw BundleError.io(errno: EIO, operation: "mount", path: mountpoint) }
        mounted = true
        if autoUnmount { autoUnmountDevice = Self.deviceCopyReleasedFirst(of: session) }
    }

    /// Serves requests until unmounted or until SIGINT, SIGTERM or SIGHUP,
    /// then unmounts.
    ///
    /// - Throws: `BundleError.io` when the loop fails.
    package func run() throws {
        guard let session else { return }
        guard fuse_set_signal_handlers(session) == 0 else {
            throw BundleError.io(errno: EIO, operation: "install signal handlers", path: [])
        }
        defer { fuse_remove_signal_handlers(session) }
        guard let config = fuse_loop_cfg_create() else { throw BundleError.io(errno: ENOMEM, operation: "create FUSE loop", path: []) }
        defer { fuse_loop_cfg_destroy(config) }
        fuse_loop_cfg_set_clone_fd(config, 0)
        // Beside the rings, the classic loop serves only what still comes
        // through /dev/fuse (INIT, FORGET, INTERRUPT, early requests).
        let threads = context.transport.expectsRings ? min(threads, FUSETransport.classicThreadsBesideRings) : threads
        // As many idle threads as threads: libfuse then never ends a worker
        // for being idle. With fewer idle than threads it ended and
        // re-created hundreds of threads a second under concurrent random
        // readers, each new one building its scratch and deriving its file
        // key again (figures: docs/PERFORMANCE.md). The cost is that every
        // started thread's scratch (a chunk workspace and a reply buffer)
        // stays.
        fuse_loop_cfg_set_idle_threads(config, UInt32(threads))
        fuse_loop_cfg_set_max_threads(config, UInt32(threads))
        let rc = cfuse_session_loop_mt(session, config)
        // The rings first: their pending commands hold /dev/fuse open.
        context.transport.stop()
        fuse_session_unmount(session)
        mounted = false
        // fuse_session_loop*: "0, -errno, or a signal value" — a positive
        // result is the signal (SIGINT, SIGTERM, SIGHUP) that ended the loop.
        // EINTR-ok: how the loop ended, not a retry
        guard rc >= 0 || rc == -EINTR || rc == -ENODEV else {
            throw BundleError.io(errno: -rc, operation: "serve FUSE requests", path: mountpoint)
        }
    }

    /// Mounts, sets the read-ahead, calls `mounted`, then serves until
    /// unmounted or signalled (``mount()``, ``setReadahead(kilobytes:)``,
    /// ``run()``).
    ///
    /// - Parameters:
    ///   - readaheadKB: the read-ahead to set, or nil for the kernel's; a
    ///     failure to set it is logged as a warning, not thrown.
    ///   - mounted: called once the mount is in place, before serving.
    /// - Throws: `BundleError.io` from ``mount()`` or ``run()``.
    package func serve(readaheadKB: Int?, mounted: () -> Void) throws {
        // The socket before the mount, so that a socket problem fails the
        // mount instead of leaving one nobody can unlock.
        let control = try makeControlServer()
        try context.transport.choose(transportRequest, classicReason: classicReason)
        try mount()
        if let session {
            try context.transport.install(on: session, pollMicroseconds: pollMicroseconds, ringPollMicroseconds: ringPollMicroseconds)
        }
        if let readaheadKB, let problem = setReadahead(kilobytes: readaheadKB) {
            context.logger.log("warning", "read-ahead left at the kernel default: \(problem)")
        }
        try control?.start()
        defer { control?.stop() }
        // Everything that needs root to set up is done (the module
        // parameter, the mount, sysfs, the socket); the loop parses
        // requests from other users under allow_other.
        if let problem = ProcessHardening.dropPrivilegesAfterMounting(keepingPtrace: context.access.rules.restrictsCallers) {
            context.logger.log("warning", "privileges kept: \(problem)")
        }
        mounted()
        try run()
    }

    /// The control socket's server when the settings name a directory.
    private func makeControlServer() throws -> ControlServer? {
        guard let session, let directory = context.lockSettings.controlDirectory else { return nil }
        let controller = LockController(context: context, session: session, mountpoint: mountpoint)
        return try ControlServer(controller: controller, socketPath: ControlSocket.path(forMountpoint: mountpoint, in: directory),
                                 directory: directory)
    }

    /// Sets the kernel read-ahead of this mount (the `read_ahead_kb` of its
    /// backing device info in sysfs). The kernel caps FUSE read-ahead at this
    /// value, 128 KiB by default, whatever the file system asks for; larger
    /// read-ahead means fewer, larger requests for sequential reads. Needs
    /// root; best effort.
    ///
    /// The device number comes from /proc/self/mountinfo, not from `stat` of
    /// the mountpoint: this runs before the loop serves, and a `stat` would
    /// wait for the daemon itself.
    ///
    /// - Returns: nil on success, else why it could not be set.
    package func setReadahead(kilobytes: Int) -> String? {
        guard let device = Self.deviceNumber(ofMountpoint: mountpoint) else {
            return "mount not found in /proc/self/mountinfo"
        }
        let path = "/sys/class/bdi/\(device)/read_ahead_kb"
        let file: FileDescriptor
        do { file = try FileDescriptor.open(Array(path.utf8), flags: O_WRONLY) } catch {
            return "cannot open \(path): \(String(cString: strerror(error.errno)))"
        }
        let text = Array("\(kilobytes)\n".utf8)
        do { try text.withUnsafeBytes { try file.writeAll($0) } } catch {
            return "cannot write \(path): \(String(cString: strerror((error as? BundleError)?.errno ?? EIO)))"
        }
        return nil
    }

    /// "MAJ:MIN" of the newest fuse.encfs mount at `mountpoint` (an absolute
    /// path).
    static func deviceNumber(ofMountpoint mountpoint: [UInt8]) -> String? {
        newestMountFields(at: mountpoint).map { String(decoding: $0.fields[2], as: UTF8.self) }
    }

    /// The uid of the process that made the newest fuse.encfs mount at
    /// `mountpoint` (an absolute path): the kernel's `user_id=` super
    /// option, which fusermount3 sets from its caller's real uid, so no
    /// user can claim another's. nil when no such mount is there.
    package static func mountingUID(ofMountpoint mountpoint: [UInt8]) -> uid_t? {
        guard let (fields, dash) = newestMountFields(at: mountpoint), dash + 3 < fields.count else { return nil }
        let key = Array("user_id=".utf8)
        for option in fields[dash + 3].split(separator: UInt8(ascii: ",")) where option.starts(with: key) {
            return uid_t(String(decoding: option.dropFirst(key.count), as: UTF8.self))
        }
        return nil
    }

    /// The space-separated fields of the newest fuse.encfs line for
    /// `mountpoint` in /proc/self/mountinfo (whose mountpoints escape
    /// space, tab, newline and backslash as \ooo), and where its `-`
    /// separator is (fstype, source and super options follow it).
    private static func newestMountFields(at mountpoint: [UInt8]) -> (fields: [[UInt8]], dash: Int)? {
        var escaped: [UInt8] = []
        for byte in mountpoint {
            if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x5C {
                escaped += Array("\\\(String(byte, radix: 8).leftPaddedOctal)".utf8)
            } else {
                escaped.append(byte)
            }
        }
        guard let file = try? FileDescriptor.open(Array("/proc/self/mountinfo".utf8), flags: O_RDONLY) else { return nil }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Fills the chunk unless the end came first.
            guard let n = try? chunk.withUnsafeMutableBytes({ try file.read(into: $0) }), n > 0 else { break }
            contents += chunk[0..<n]
        }
        var found: (fields: [[UInt8]], dash: Int)?
        for line in contents.split(separator: 0x0A) {
            let fields = line.split(separator: 0x20).map(Array.init)
            guard fields.count > 6, fields[4] == escaped,
                  let dash = fields.firstIndex(of: [0x2D]), dash + 1 < fields.count,
                  fields[dash + 1] == Array("fuse.encfs".utf8) else { continue }
            found = (fields, dash)
        }
        return found
    }

    /// Whether a FUSE file system answers at `mountpoint`: `statfs` waits
    /// for the FUSE handshake and fails (ENOTCONN) if the daemon died.
    package static func isServing(_ mountpoint: [UInt8]) -> Bool {
        var fs = statfs()
        let fuseSuperMagic = 0x65735546 // FUSE_SUPER_MAGIC
        return mountpoint.withCString { statfs($0, &fs) } == 0 && fs.f_type == fuseSuperMagic
    }
}

private extension String {
    /// Three octal digits, as mountinfo writes escapes.
    var leftPaddedOctal: String { count >= 3 ? self : String(repeating: "0", count: 3 - count) + self }
}
