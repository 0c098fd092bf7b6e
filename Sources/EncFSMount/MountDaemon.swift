import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// The background mount: the command starts a daemon, hands it the bundle
/// and the content key, and returns once the daemon says the mount is up.
///
/// The daemon is this same program executed again (fork after the Swift
/// runtime has started threads is unsafe), through `/proc/self/exe`: that
/// names the very file this process runs even if the path it was started
/// from has since been replaced, where resolving the link to a path and
/// executing that would run whatever is at the path by then. It starts in
/// its own session with stdio on /dev/null and gets, besides its argv (the
/// settings, never a secret):
///
///     fd 3  the content key, 32 bytes, then end of file (nothing when
///           the mount starts locked: `--start-locked`)
///     fd 4  its verdict (``Verdict``): byte 0 once mounted, or an
///           ``ErrorCode`` byte, MESSAGE [NUL PATH]
///     fd 5  the bundle the command opened and checked (the path in argv
///           is for messages: a file renamed over it later changes nothing);
///           for a remote bundle, a pipe with its address, headers and
///           what the command's first request pinned (RemoteHandOver)
package enum MountDaemon {
    /// Marks the re-executed daemon's argv; what follows it is the
    /// settings, as `MountCommand` writes them.
    package static let flag = "--internal-daemon-child"
    /// The daemon's process name, for ps, pgrep and killall: executing
    /// /proc/self/exe would name it "exe".
    package static let processName = "encfs-mount"
    /// Where the daemon finds the content key (the command writes it, then closes).
    static let keyFD = FileDescriptor.Borrowed(3, path: Array("key channel (fd 3)".utf8))
    /// Where the daemon writes its verdict (mounted, or why not).
    static let statusFD = FileDescriptor.Borrowed(4, path: Array("verdict pipe (fd 4)".utf8))
    /// The bundle file, or a remote bundle's hand-over pipe.
    static let bundleFD = FileDescriptor.Borrowed(5, path: Array("bundle (fd 5)".utf8))
    /// Longest verdict read from the daemon.
    static let maximumStatusLength = 4096

    // MARK: - Command side

    /// Starts the daemon and waits until it has mounted `mountpoint` and
    /// serves it (``launch(bundle:arguments:)``, then
    /// ``Launched/handOver(contentKey:mountpoint:)``).
    ///
    /// - Parameters:
    ///   - bundle: the opened, checked bundle.
    ///   - contentKey: the key it unlocked; nil to start locked.
    ///   - arguments: the daemon's settings (what follows ``flag``).
    ///   - mountpoint: absolute; checked for an answer once the daemon
    ///     reports the mount.
    /// - Throws: `MountError` when the daemon cannot start, take the key,
    ///   mount or serve.
    package static func start(bundle: FileDescriptor, contentKey: SymmetricKey?, arguments: [[UInt8]],
                              mountpoint: [UInt8]) throws(MountError) {
        try launch(bundle: bundle, arguments: arguments).handOver(contentKey: contentKey, mountpoint: mountpoint)
    }

    /// Starts the daemon without a key yet: it loads the program and
    /// OpenSSL's tables (``CryptoStartup``) while this process unlocks the
    /// header, then waits for ``Launched/handOver(contentKey:mountpoint:)``
    /// or, once ``Launched/abandon()`` closes its key pipe, exits without
    /// a trace (no log, no socket, no mount: it has not got that far).
    ///
    /// SIGPIPE is ignored from here on in this process: a daemon that died
    /// before taking the key then makes the write fail with EPIPE, which is
    /// reported, rather than killing the command without a word. The
    /// daemon starts with SIGPIPE at its default.
    ///
    /// - Parameters:
    ///   - bundle: the opened bundle (checked by the command before the
    ///     key is handed over).
    ///   - arguments: the daemon's settings (what follows ``flag``).
    /// - Throws: `MountError.daemonNotStarted`.
    package static func launch(bundle: FileDescriptor, arguments: [[UInt8]]) throws(MountError) -> Launched {
        signal(SIGPIPE, SIG_IGN)
        let key = try makePipe()
        let verdict = try makePipe()
        let bundleCopy: FileDescriptor
        // Numbered 10 or more, as the pipes: the child's dup2 calls fill
        // fds 3…5 in turn and must not overwrite a source still to be copied.
        do { bundleCopy = try bundle.duplicate(lowest: 10) } catch { throw .daemonNotStarted(errno: error.errno, operation: "hand over the bundle") }
        let pid = try spawn(arguments: arguments, key: key.read, verdict: verdict.write, bundle: bundleCopy)
        // The daemon's ends close when the locals go, so the verdict pipe
        // ends at the daemon's last close.
        return Launched(pid: pid, keyChannel: key.write, verdict: verdict.read)
    }

    /// A daemon started by ``launch(bundle:arguments:)``, waiting for its key.
    package struct Launched: ~Copyable {
        let pid: pid_t
        let keyChannel: FileDescriptor
        let verdict: FileDescriptor

        /// Writes the key (nothing to start locked), closes the key pipe
        /// and waits until the daemon has mounted `mountpoint` and serves it.
        ///
        /// - Throws: `MountError` when the daemon cannot take the key,
        ///   mount or serve.
        package consuming func handOver(contentKey: SymmetricKey?, mountpoint: [UInt8]) throws(MountError) {
            let pid = self.pid
            let verdict = self.verdict
            do {
                let channel = self.keyChannel
                try contentKey?.withUnsafeBytes { (bytes) throws(BundleError) in try channel.writeAll(bytes) }
                // `channel` closes here: end of file after the key.
            } catch {
                kill(pid, SIGTERM)
                MountDaemon.reap(pid)
                throw .keyNotHandedOver(errno: error.errno)
            }
            switch Verdict(decoding: MountDaemon.readVerdict(verdict)) {
            case .mounted?:
                // statfs waits for the FUSE handshake and fails with ENOTCONN
                // if the daemon died right after mounting.
                guard MountSession.isServing(mountpoint) else { throw .daemonStopped }
            case .failed(let code, let message, let path)?:
                MountDaemon.reap(pid)
                throw .daemonFailed(code: code, message: message, path: path)
            case nil:
                MountDaemon.reap(pid)
                throw .daemonExited
            }
        }

        /// Ends the daemon before it got a key (the command failed to
        /// unlock) and waits for it: it has mounted nothing, logged nothing.
        package consuming func abandon() {
            kill(pid, SIGTERM)
            MountDaemon.reap(pid)
        }
    }

    /// `posix_spawn` of /proc/self/exe with fds 3, 4, 5 in place, stdio on
    /// /dev/null, a new session and SIGPIPE at its default.
    private static func spawn(arguments: [[UInt8]], key: FileDescriptor, verdict: FileDescriptor,
                              bundle: FileDescriptor) throws(MountError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, key.rawValue, keyFD.rawValue)
        posix_spawn_file_actions_adddup2(&actions, verdict.rawValue, statusFD.rawValue)
        posix_spawn_file_actions_adddup2(&actions, bundle.rawValue, bundleFD.rawValue)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        // POSIX_SPAWN_SETSID (glibc ≥ 2.26) and POSIX_SPAWN_SETSIGDEF are
        // macros Swift does not import.
        let spawnSetSID: Int16 = 0x80
        let spawnSetSigDefault: Int16 = 0x04
        posix_spawnattr_setflags(&attributes, spawnSetSID | spawnSetSigDefault)

        let argv = [Array(processName.utf8), Array(flag.utf8)] + arguments
        let cArgs = argv.map { arg -> UnsafeMutablePointer<CChar>? in arg.withCString { strdup($0) } }
        defer { cArgs.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = (cArgs + [nil]).withUnsafeBufferPointer { argv -> Int32 in
            guard let base = argv.baseAddress else { return EINVAL }
            return posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, base, environ)
        }
        guard rc == 0 else { throw .daemonNotStarted(errno: rc, operation: "spawn") }
        return pid
    }

    /// Reads the daemon's verdict to end of file (at most
    /// ``maximumStatusLength`` bytes); empty when it said nothing.
    private static func readVerdict(_ verdict: FileDescriptor) -> [UInt8] {
        var status = [UInt8](repeating: 0, count: maximumStatusLength)
        let n = status.withUnsafeMutableBytes { (try? verdict.read(into: $0)) ?? 0 }
        return Array(status[0..<n])
    }

    /// Waits for `pid` to end (so no zombie is left).
    private static func reap(_ pid: pid_t) {
        var status: Int32 = 0
        _ = try? SystemCall.retrying("wait for the mount daemon") { waitpid(pid, &status, 0) }
    }

    /// A pipe, both ends close-on-exec and numbered 10 or more.
    private static func makePipe() throws(MountError) -> (read: FileDescriptor, write: FileDescriptor) {
        // The originals close when these go; the copies are close-on-exec.
        do {
            let (read, write) = try FileDescriptor.pipe(closeOnExec: false)
            return (try read.duplicate(lowest: 10), try write.duplicate(lowest: 10))
        } catch {
            throw .daemonNotStarted(errno: error.errno, operation: "create pipe")
        }
    }

    // MARK: - Daemon side

    /// Serves the bundle handed over on fd 5 with the key from fd 3,
    /// reporting on fd 4, until unmounted or signalled.
    ///
    /// Until the mount is up every failure goes to the command through
    /// fd 4; after that, to the log.
    ///
    /// - Parameter openSource: makes the bundle's byte source from fd 5:
    ///   by default the file handed over; a remote bundle's command hands
    ///   over its address and headers there instead (EncFSCLI, which
    ///   links the HTTP layer this target does not).
    /// - Returns: whether it ended cleanly.
    package static func serve(_ configuration: MountConfiguration,
                              openSource: (FileDescriptor) throws -> any ByteSource = { try FileByteSource(descriptor: $0) }) -> Bool {
        ProcessHardening.setProcessName(processName)
        // dup2 cleared close-on-exec: keep the verdict pipe from anything
        // libfuse starts (fusermount3), or the command would wait for it.
        _ = fcntl(statusFD.rawValue, F_SETFD, FD_CLOEXEC)
        var verdict: FileDescriptor? = FileDescriptor(taking: statusFD.rawValue, path: statusFD.path)
        func report(_ status: Verdict) {
            status.encoded.withUnsafeBytes { try? verdict?.writeAll($0) }
            verdict = nil
        }
        func fail(_ error: Error, path: [UInt8]) -> Bool {
            report(Verdict(failure: error, path: path))
            return false
        }
        // Before the key: OpenSSL's tables load while the command unlocks
        // the header (MountDaemon.launch).
        CryptoStartup.prepare()
        var key: SymmetricKey?
        if !configuration.lock.startsLocked {
            do { key = try receiveKey() } catch {
                report(.failed(.keyNotReceived, message: "no key received from the parent process", path: nil))
                return false
            }
        }
        let logger = configuration.logFile.flatMap { try? MountLogger.appending(to: $0) } ?? MountLogger(sink: .syslog)
        logger.warnIfSecretsNotLocked()
        _ = chdir("/")
        let reader: ReaderHandoff
        let source: any ByteSource
        // An unlock through the control socket opens the bundle again with
        // these (the scrypt limit is the default one).
        let options = OpenOptions(allowsExternalSymlinks: configuration.allowsExternalSymlinks, origin: configuration.origin)
        do {
            // The command checked only the header; a damaged index is
            // reported from here, naming the bundle.
            source = try openSource(FileDescriptor(taking: bundleFD.rawValue, path: configuration.bundlePath))
            // The origin too: the daemon reads the index a signature covers.
            // The handoff is the only holder until the session takes it.
            reader = ReaderHandoff(try key.map {
                try BundleReader.open(source: source, contentKey: $0, indexCacheBytes: configuration.indexCacheKB << 10, options: options)
            })
        } catch {
            return fail(error, path: configuration.bundlePath)
        }
        // Only the reader holds the key from here on (a lock drops it).
        key = nil
        do {
            let session = try MountSession(reader: reader, source: source, options: options,
                                           configuration: configuration, logger: logger)
            try session.serve(readaheadKB: configuration.readaheadKB) {
                report(.mounted)
                logger.log("info", "serving", path: configuration.mountpoint)
            }
        } catch {
            if verdict != nil { return fail(error, path: configuration.mountpoint) }
            logger.log("error", (error as? BundleError)?.message ?? "\(error)", path: configuration.mountpoint)
            return false
        }
        logger.log("info", "unmounted", path: configuration.mountpoint)
        return true
    }

    /// The content key from fd 3 (closed afterwards).
    private static func receiveKey() throws -> SymmetricKey {
        let channel = FileDescriptor(taking: keyFD.rawValue, path: keyFD.path)
        let raw = try SecureBytes(count: SymmetricKey.byteCount) { (out: UnsafeMutableRawBufferPointer) throws in
            guard try channel.read(into: out) == SymmetricKey.byteCount else { throw MountError.keyNotHandedOver(errno: EPIPE) }
        }
        return try SymmetricKey(raw)
    }
}
