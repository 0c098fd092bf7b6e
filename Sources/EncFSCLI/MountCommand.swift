import EncFS
import EncFSMount
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-mount BUNDLE MOUNTPOINT [options]`.
///
/// The key and the index are verified before anything is mounted. Without
/// `-f`, the command re-executes itself as a daemon (fork after the Swift
/// runtime has started threads is unsafe), hands it the content key over a
/// pipe (never argv or the environment), and returns once the daemon reports
/// that the mount is up, or prints the daemon's error.
public enum MountCommand {
    static let help = """
    usage: encfs-mount BUNDLE MOUNTPOINT [key options] [-f] [-o FUSE_OPTION,...] [--log-file FILE]

    Mounts the bundle read-only at MOUNTPOINT. Every read decrypts only the
    chunks it covers, in memory. Unmount with: fusermount3 -u MOUNTPOINT

    key options (any one that opens a key slot is enough):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM: X25519 from encfs-keygen or
                               openssl, or RSA ≥ 2048 bits) for recipient slots
      environment: ENCFS_KEY (hex key), ENCFS_PASSPHRASE and ENCFS_IDENTITY (a
      path), used when no key option is given; with none of these and a
      terminal, a passphrase is asked for without echo. ENCFS_KEY and
      ENCFS_PASSPHRASE are removed from the daemon's environment once read.

    options:
      -f, --foreground         stay in the foreground, log to stderr, unmount
                               cleanly on SIGINT or SIGTERM
      -o OPTIONS               extra FUSE mount options, e.g. allow_other
      --log-file FILE          in the background, append log lines to FILE
                               (default: syslog, facility daemon)
      --readahead KB           kernel read-ahead for this mount, 0 … 16384
                               (default 1024 when run as root, else the
                               kernel's 128; needs root to change)
      --index-cache KB         memory for decrypted index pages, 64 … 1048576
                               (default 4096); the rest of the index stays
                               sealed in the bundle, so memory does not grow
                               with the number of files
      --threads N              worker threads, 1 … 64 (default: two per CPU,
                               at least 4); more help only when the bundle
                               sits on slow storage and reads wait for it
      -h, --help               this text
      --                       end of options

    exit codes: 0 mounted (or, with -f, unmounted cleanly), 1 runtime failure
    (wrong key, damaged bundle, mountpoint problem), 2 usage error
    """

    static let parser = ArgumentParser(options: [
        .init(["--key-file"], takesValue: true),
        .init(["--passphrase-file"], takesValue: true),
        .init(["--identity"], takesValue: true),
        .init(["--foreground", "-f"], takesValue: false),
        .init(["-o"], takesValue: true),
        .init(["--log-file"], takesValue: true),
        .init(["--readahead"], takesValue: true),
        .init(["--index-cache"], takesValue: true),
        .init(["--threads"], takesValue: true),
        .init(["--help", "-h"], takesValue: false),
        .init([daemonFlag], takesValue: false),
    ])

    /// Internal: marks the re-executed daemon. It reads the content key from
    /// fd 3, reports readiness on fd 4, and serves the bundle open on fd 5
    /// (the very file the parent verified; the path is for messages).
    static let daemonFlag = "--internal-daemon-child"
    static let keyFD: Int32 = 3
    static let statusFD: Int32 = 4
    static let bundleFD: Int32 = 5

    /// Runs the command and returns its exit code.
    public static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-mount")
        let args: ArgumentParser.Result
        do {
            args = try parser.parse(arguments)
            if args.has("--help") {
                print(help)
                return ExitCode.success
            }
            guard args.positionals.count == 2 else {
                throw UsageError(args.positionals.count < 2 ? "missing BUNDLE or MOUNTPOINT" : "too many arguments")
            }
        } catch {
            diagnostics.report(error)
            diagnostics.hint("see encfs-mount --help")
            return ExitCode.usage
        }
        let extraOptions = args.values("-o").flatMap { String(decoding: $0, as: UTF8.self).split(separator: ",").map(String.init) }
        if let bad = extraOptions.first(where: { $0 == "rw" || $0.hasPrefix("fsname=") || $0.hasPrefix("max_read=") }) {
            diagnostics.error("option -o \(bad) is not allowed (the mount is read-only and sets its own)")
            return ExitCode.usage
        }
        var readahead: Int? = getuid() == 0 ? defaultReadahead : nil
        if let text = args.value("--readahead") {
            guard let kb = Int(String(decoding: text, as: UTF8.self)), (0...16384).contains(kb) else {
                diagnostics.error("--readahead must be a number of KiB from 0 to 16384")
                return ExitCode.usage
            }
            readahead = kb
        }
        var indexCacheKB = IndexPages.defaultCacheBytes >> 10
        if let text = args.value("--index-cache") {
            let range = (IndexPages.minimumCacheBytes >> 10)...(1 << 20)
            guard let kb = Int(String(decoding: text, as: UTF8.self)), range.contains(kb) else {
                diagnostics.error("--index-cache must be a number of KiB from \(range.lowerBound) to \(range.upperBound)")
                return ExitCode.usage
            }
            indexCacheKB = kb
        }
        var threads = MountSession.defaultThreads
        if let text = args.value("--threads") {
            guard let n = Int(String(decoding: text, as: UTF8.self)), (1...MountSession.maximumThreads).contains(n) else {
                diagnostics.error("--threads must be a number from 1 to \(MountSession.maximumThreads)")
                return ExitCode.usage
            }
            threads = n
        }
        if args.has(daemonFlag) {
            return runDaemon(bundle: args.positionals[0], mountpoint: args.positionals[1], extraOptions: extraOptions,
                             logFile: args.value("--log-file"), readahead: readahead, indexCacheKB: indexCacheKB,
                             threads: threads)
        }
        let bundle = args.positionals[0]
        let mountpoint = args.positionals[1]
        let foreground = args.has("--foreground")
        // In the foreground this process serves: open everything. Otherwise
        // only the header is unlocked here; the daemon loads and checks the
        // index (once, not in both processes) and reports a damaged one
        // through the status pipe before anything is mounted.
        let opened: OpenedBundle
        do {
            let materials = try KeySources.gather(keyFiles: args.values("--key-file"),
                                                  passphraseFiles: args.values("--passphrase-file"),
                                                  identityFiles: args.values("--identity"), confirm: false)
            if foreground {
                opened = .reader(try BundleReader.open(path: bundle, materials: materials, indexCacheBytes: indexCacheKB << 10))
            } else {
                let source = try FileByteSource(path: bundle)
                opened = .unlocked(source: source, keys: try BundleReader.unlock(source: source, materials: materials))
            }
        } catch let e as KeyInputError {
            diagnostics.error(e.message, path: e.path)
            return ExitCode.failure
        } catch {
            diagnostics.report(error, path: bundle)
            return ExitCode.failure
        }
        do {
            try checkMountpoint(mountpoint)
        } catch {
            diagnostics.report(error, path: mountpoint)
            return ExitCode.failure
        }
        switch opened {
        case .unlocked(let source, let keys):
            return spawnDaemon(source: source, contentKey: keys.contentKey, bundle: bundle, mountpoint: mountpoint,
                               extraOptions: extraOptions, logFile: args.value("--log-file"), readahead: readahead,
                               indexCacheKB: indexCacheKB, threads: threads, diagnostics: diagnostics)
        case .reader(let reader):
            let logger: MountLogger
            if let logFile = args.value("--log-file") {
                guard let fd = openLog(logFile) else {
                    diagnostics.error("cannot open log file", path: logFile)
                    return ExitCode.failure
                }
                logger = MountLogger(sink: .file(fd))
            } else {
                logger = MountLogger(sink: .standardError)
            }
            warnIfUnlocked(logger)
            do {
                let session = try MountSession(reader: reader, bundlePath: (try? FileIO.resolvedPath(bundle)) ?? bundle, mountpoint: (try? FileIO.resolvedPath(mountpoint)) ?? mountpoint,
                                               extraOptions: extraOptions, logger: logger, threads: threads)
                try session.mount()
                applyReadahead(readahead, to: session, logger: logger)
                try session.run()
                return ExitCode.success
            } catch {
                diagnostics.report(error, path: mountpoint)
                return ExitCode.failure
            }
        }
    }

    /// What the command opened: the whole bundle when it serves in the
    /// foreground, the unlocked file and keys when a daemon will serve.
    private enum OpenedBundle {
        case reader(BundleReader)
        case unlocked(source: FileByteSource, keys: BundleKeys)
    }

    // MARK: - Parent side

    private static func spawnDaemon(source: FileByteSource, contentKey: SymmetricKey, bundle: [UInt8], mountpoint: [UInt8],
                                    extraOptions: [String], logFile: [UInt8]?, readahead: Int?, indexCacheKB: Int,
                                    threads: Int, diagnostics: Diagnostics) -> Int32 {
        guard let absoluteBundle = (try? FileIO.resolvedPath(bundle)), let absoluteMountpoint = (try? FileIO.resolvedPath(mountpoint)) else {
            diagnostics.error("cannot resolve path", path: bundle)
            return ExitCode.failure
        }
        var absoluteLog: [UInt8]?
        if let logFile {
            guard let fd = openLog(logFile) else {
                diagnostics.error("cannot open log file", path: logFile)
                return ExitCode.failure
            }
            close(fd)
            absoluteLog = (try? FileIO.resolvedPath(logFile))
        }
        // A copy numbered 10 or more: the child's dup2 calls fill fds 3…5 in
        // turn, and the original (opened first, often fd 3) would be
        // overwritten by the key pipe before it is copied to fd 5.
        let bundleCopy: FileDescriptor
        do { bundleCopy = try source.descriptor.duplicate(lowest: 10) } catch {
            diagnostics.error("cannot hand the bundle to the mount daemon: \(error.message)", path: bundle)
            return ExitCode.failure
        }
        guard let keyPipe = makePipe(), let statusPipe = makePipe() else {
            diagnostics.error("cannot create pipe: \(String(cString: strerror(errno)))")
            return ExitCode.failure
        }
        var childArgs: [[UInt8]] = [Array("encfs-mount".utf8), Array(daemonFlag.utf8), absoluteBundle, absoluteMountpoint]
        for option in extraOptions { childArgs += [Array("-o".utf8), Array(option.utf8)] }
        if let absoluteLog { childArgs += [Array("--log-file".utf8), absoluteLog] }
        if let readahead { childArgs += [Array("--readahead".utf8), Array(String(readahead).utf8)] }
        childArgs += [Array("--index-cache".utf8), Array(String(indexCacheKB).utf8)]
        childArgs += [Array("--threads".utf8), Array(String(threads).utf8)]

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, keyPipe.read, keyFD)
        posix_spawn_file_actions_adddup2(&actions, statusPipe.write, statusFD)
        posix_spawn_file_actions_adddup2(&actions, bundleCopy.rawValue, bundleFD)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc ≥ 2.26) is a macro Swift does not import.
        let spawnSetSID: Int16 = 0x80
        posix_spawnattr_setflags(&attributes, spawnSetSID)

        var pid: pid_t = 0
        let executable = (try? FileIO.resolvedPath(Array("/proc/self/exe".utf8))) ?? Array("/proc/self/exe".utf8)
        let cArgs = childArgs.map { arg -> UnsafeMutablePointer<CChar>? in arg.withCString { strdup($0) } }
        defer { cArgs.forEach { free($0) } }
        let rc = (cArgs + [nil]).withUnsafeBufferPointer { argv -> Int32 in
            guard let base = argv.baseAddress else { return EINVAL }
            // The resolved path, not /proc/self/exe, so the daemon's process
            // name (comm) is encfs-mount for ps, pgrep and killall.
            return executable.withCString { posix_spawn(&pid, $0, &actions, &attributes, base, environ) }
        }
        close(keyPipe.read)
        close(statusPipe.write)
        guard rc == 0 else {
            close(keyPipe.write)
            close(statusPipe.read)
            diagnostics.error("cannot start the mount daemon: \(String(cString: strerror(rc)))")
            return ExitCode.failure
        }
        // Hand over the content key, then wait for the verdict.
        contentKey.withUnsafeBytes { key in
            _ = write(keyPipe.write, key.baseAddress, key.count)
        }
        close(keyPipe.write)
        var status: [UInt8] = []
        var byte: UInt8 = 0
        while status.count < 4096 {
            let n = read(statusPipe.read, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            status.append(byte)
        }
        close(statusPipe.read)
        if status.first == UInt8(ascii: "0") {
            // Mounted; make sure it also serves: statfs waits for the FUSE
            // handshake and fails with ENOTCONN if the daemon died.
            if MountSession.isServing(absoluteMountpoint) { return ExitCode.success }
            diagnostics.error("the mount daemon stopped right after mounting (see its log)", path: mountpoint)
            return ExitCode.failure
        }
        var childStatus: Int32 = 0
        while waitpid(pid, &childStatus, 0) < 0 && errno == EINTR {}
        if status.first == UInt8(ascii: "1") {
            var line = Array("encfs-mount: error: ".utf8) + status.dropFirst()
            if line.last != 0x0A { line.append(0x0A) }
            line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
        } else {
            diagnostics.error("the mount daemon exited before the mount was ready", path: mountpoint)
        }
        return ExitCode.failure
    }

    // MARK: - Daemon side

    private static func runDaemon(bundle: [UInt8], mountpoint: [UInt8], extraOptions: [String], logFile: [UInt8]?,
                                  readahead: Int?, indexCacheKB: Int, threads: Int) -> Int32 {
        func fail(_ message: String, path: [UInt8]?) -> Int32 {
            var line = Array("1\(message)".utf8)
            if let path { line += Array(" (".utf8) + path + Array(")".utf8) }
            line.withUnsafeBytes { _ = write(statusFD, $0.baseAddress, $0.count) }
            close(statusFD)
            return ExitCode.failure
        }
        let key: SymmetricKey
        do {
            let raw = try SecureBytes(count: SymmetricKey.byteCount) { (out: UnsafeMutableRawBufferPointer) throws in
                let n = try FileIO.readFull(keyFD, into: out, path: [])
                guard n == SymmetricKey.byteCount else { throw KeyInputError("no key received from the parent process") }
            }
            key = try SymmetricKey(raw)
        } catch {
            close(keyFD)
            return fail("no key received from the parent process", path: nil)
        }
        close(keyFD)
        let logger: MountLogger
        if let logFile, let fd = openLog(logFile) {
            logger = MountLogger(sink: .file(fd))
        } else {
            logger = MountLogger(sink: .syslog)
        }
        warnIfUnlocked(logger)
        _ = chdir("/")
        let session: MountSession
        let reader: BundleReader
        do {
            // The parent checked only the header; a damaged index is
            // reported from here, naming the bundle.
            let source = try FileByteSource(descriptor: FileDescriptor(taking: bundleFD, path: bundle))
            reader = try BundleReader.open(source: source, contentKey: key, indexCacheBytes: indexCacheKB << 10)
        } catch let e as BundleError {
            return fail(e.message, path: e.path ?? bundle)
        } catch {
            return fail("\(error)", path: bundle)
        }
        do {
            session = try MountSession(reader: reader, bundlePath: bundle, mountpoint: mountpoint,
                                       extraOptions: extraOptions, logger: logger, threads: threads)
            try session.mount()
        } catch let e as BundleError {
            return fail(e.message, path: e.path ?? mountpoint)
        } catch {
            return fail("\(error)", path: mountpoint)
        }
        applyReadahead(readahead, to: session, logger: logger)
        // Mounted: from here on the parent is gone and errors go to the log.
        _ = "0".withCString { write(statusFD, $0, 1) }
        close(statusFD)
        logger.log("info", "serving", path: mountpoint)
        do {
            try session.run()
        } catch {
            logger.log("error", (error as? BundleError)?.message ?? "\(error)", path: mountpoint)
            return ExitCode.failure
        }
        logger.log("info", "unmounted", path: mountpoint)
        return ExitCode.success
    }

    // MARK: - Helpers

    /// Read-ahead set when running as root and `--readahead` is not given:
    /// 1 MiB requests instead of the kernel's 128 KiB for sequential reads.
    static let defaultReadahead = 1024

    private static func applyReadahead(_ kilobytes: Int?, to session: MountSession, logger: MountLogger) {
        guard let kilobytes else { return }
        if let problem = session.setReadahead(kilobytes: kilobytes) {
            logger.log("warning", "read-ahead left at the kernel default: \(problem)")
        }
    }

    static func checkMountpoint(_ path: [UInt8]) throws {
        var st = stat()
        guard path.withCString({ stat($0, &st) }) == 0 else {
            throw CommandError("mountpoint problem: \(String(cString: strerror(errno)))", path: path)
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw CommandError("mountpoint problem: not a directory", path: path)
        }
    }

    private static func warnIfUnlocked(_ logger: MountLogger) {
        if SecureMemoryStatus.lockFailures > 0 {
            logger.log("warning", "could not lock key memory (RLIMIT_MEMLOCK); it may be swapped out")
        }
    }

    private static func openLog(_ path: [UInt8]) -> Int32? {
        let fd = path.withCString { open($0, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600) }
        return fd >= 0 ? fd : nil
    }

    /// A pipe whose ends sit above the fds the child expects, close-on-exec.
    private static func makePipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        let r = fcntl(fds[0], F_DUPFD_CLOEXEC, 10)
        let w = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
        close(fds[0])
        close(fds[1])
        guard r >= 0, w >= 0 else { return nil }
        return (r, w)
    }
}
