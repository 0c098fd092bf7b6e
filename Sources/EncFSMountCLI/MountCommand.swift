import EncFSCore
import EncFSService
import EncFSMount
import EncFSRemote
import CryptCore
#if canImport(Glibc)
import Glibc
import EncFSCLI
#endif

/// `encfs-mount BUNDLE MOUNTPOINT [options]`.
///
/// Parses the options, gathers the key, unlocks the bundle and reports
/// errors; `MountDaemon` (background) or `MountSession` (with `-f`) serves.
/// The key and the index are verified before anything is mounted. Without
/// `-f` the daemon gets the content key over a pipe (never argv or the
/// environment), and the command returns once the daemon reports that the
/// mount is up, or prints the daemon's error.
package enum MountCommand {
    static let help = """
    usage: encfs-mount BUNDLE MOUNTPOINT [key options] [--verify-key PUBFILE]... [-f] [-o FUSE_OPTION,...] [--log-file FILE] [--log-names] [--transport uring|classic] [--poll-us N]
           encfs-mount URL|--address-file FILE MOUNTPOINT [key options] [--cache-dir DIR] [--cache-size SIZE] [--fetch-size SIZE] [--connections N] [--prefetch none|index|all] [--header-file FILE] [--net-timeout SECONDS] [--retries N] [--ca-file FILE]

    Mounts the bundle read-only at MOUNTPOINT. Every read decrypts only the
    chunks it covers, in memory. Unmount with: fusermount3 -u MOUNTPOINT

    key options (any one that opens a key slot is enough):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM: X25519 from encfs-keygen or
                               openssl, or RSA ≥ 2048 bits) for recipient slots
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY (hex key), ENCFS_PASSPHRASE and ENCFS_IDENTITY (a
      path), used when no key option is given; with none of these and a
      terminal, a passphrase is asked for without echo. ENCFS_KEY and
      ENCFS_PASSPHRASE are removed from the daemon's environment once read.

    origin options (checked before anything is mounted; the daemon checks
    them again itself):
    \(ReaderOptions.originHelp)

    lock options (control a mount with encfs-ctl MOUNTPOINT status|lock|unlock):
    \(LockOptions.help)

    options:
      -f, --foreground         stay in the foreground, log to stderr, unmount
                               cleanly on SIGINT or SIGTERM; with NOTIFY_SOCKET
                               set (systemd Type=notify), report READY=1 once
                               the mount serves and STOPPING=1 at unmount
      -o OPTIONS               extra FUSE mount options, e.g. allow_other; the
                               mount is always ro,nosuid,nodev: rw, suid and
                               dev are accepted (fstab adds them) and ignored.
                               Every long option is also -o name=value (or
                               -o name for a flag), dashes as underscores:
                               -o keyfile=FILE,passfile=FILE,identity=FILE,
                               index_cache=KB; mount(8)'s own options
                               (_netdev, nofail, noauto, x-*, comment=) are
                               ignored; key= and passphrase= are refused
      --log-file FILE          in the background, append log lines to FILE
                               (default: syslog, facility daemon)
      --log-names              name the file in log lines (damaged chunks,
                               failed reads), control bytes escaped as \\xNN;
                               names are as secret as contents, so by default
                               a line gives the inode and chunk number only
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
                               (default for a URL: 16, so that reads waiting
                               for the server leave workers free); these are
                               the classic loop's: beside the io_uring queues
                               it keeps two at most
      --transport uring|classic
                               how requests reach the daemon: uring (FUSE
                               over io_uring, per-CPU queues; Linux 6.14+,
                               and as root the fuse module's enable_uring
                               parameter is turned on when off) or classic
                               (/dev/fuse). Default: classic (measured
                               faster for sequential reads); uring asked
                               for and unavailable is an error, and is
                               refused with -o auto_unmount or a remote
                               bundle
      --poll-us N              while requests come one at a time, one worker
                               (classic) or, only when this option is
                               given, a ring's helper thread (uring) polls
                               N microseconds for the next before
                               sleeping, 0 … 1000 (default 50; 0: never);
                               it spins a CPU only while
                               requests keep coming within N µs, never for
                               concurrent readers, an idle mount or a
                               remote bundle
    \(ReaderOptions.help)

    \(RemoteCommandLine.help)
    \(RemoteCommandLine.addressFileHelp)
      -h, --help               this text
      --version                print the version and exit
      --                       end of options

    \(AccessOptions.help)

    exit codes: 0 mounted (or, with -f, unmounted cleanly), 1 runtime failure
    (wrong key, damaged bundle, bundle not signed by a --verify-key key,
    mountpoint problem), 2 usage error
    """

    /// The options that set how a mount serves: the command's and the
    /// daemon's (``MountDaemonCommandLine``) alike.
    static let servingOptions: [ArgumentParser.Option] = [
        .init(["-o"], takesValue: true),
        .init(["--log-file"], takesValue: true),
        .init(["--log-names"], takesValue: false),
        .init(["--readahead"], takesValue: true),
        .init(["--index-cache"], takesValue: true),
        .init(["--threads"], takesValue: true),
        .init(["--transport"], takesValue: true),
        .init(["--poll-us"], takesValue: true),
    ]

    static let parser = ArgumentParser(options: [.init(["--foreground", "-f"], takesValue: false)] + servingOptions + [
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
        .init([RemoteCommandLine.addressFile], takesValue: true),
    ] + KeyOptions.parserOptions + ReaderOptions.parserOptions + AccessOptions.parserOptions + RemoteCommandLine.parserOptions
        + LockOptions.parserOptions)

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-mount")
        // Before anything else: with -f this process serves for the
        // mount's life, and its argv is anyone's to read.
        ProcessArguments.hideAddresses()
        if MountDaemonCommandLine.isDaemon(arguments) { return MountDaemonCommandLine.run(arguments, diagnostics: diagnostics) }
        let mode: MountMode
        do {
            mode = try MountMode(arguments: arguments)
        } catch {
            return argumentFailure(error, diagnostics: diagnostics)
        }
        switch mode {
        case .help:
            print(help)
            return ExitCode.success
        case .version:
            print(VersionOption.text(tool: "encfs-mount"))
            return ExitCode.success
        case .remote(let request, let url, let options):
            return mountRemote(request, url: url, options: options, diagnostics: diagnostics)
        case .locked(let request):
            return mountLocked(request, diagnostics: diagnostics)
        case .background(let request):
            return mountInBackground(request, diagnostics: diagnostics)
        case .foreground(let request):
            return mountInForeground(request, diagnostics: diagnostics)
        }
    }

    /// Reports arguments that could not be read, and returns the exit
    /// code: 2 for a usage error, 1 for a verifying key file that cannot
    /// be read (a runtime failure).
    static func argumentFailure(_ error: any Error, diagnostics: Diagnostics) -> Int32 {
        diagnostics.report(error)
        guard error is UsageError else { return ExitCode.failure }
        diagnostics.hint("see encfs-mount --help")
        return ExitCode.usage
    }

    /// Why a mount ends before it starts: its exit code, the reason
    /// already reported.
    struct EarlyExit: Error {
        let code: Int32
    }

    /// What an unlocked local mount starts with, in the foreground or the
    /// background: the access policy available, the key material gathered.
    static func startingMaterials(_ request: MountRequest, diagnostics: Diagnostics) -> Result<[KeyMaterial], EarlyExit> {
        guard accessAvailable(request.configuration, diagnostics: diagnostics) else { return .failure(EarlyExit(code: ExitCode.failure)) }
        do {
            return .success(try KeyOptions.gather(from: request.args, confirm: false))
        } catch {
            diagnostics.report(error)
            return .failure(EarlyExit(code: ExitCode.code(for: error)))
        }
    }

    /// Whether the machine allows the access policy the mount asks for
    /// (allow_other, cgroups), after reporting why not; warns about a
    /// policy that lets more in than it seems to.
    static func accessAvailable(_ configuration: MountConfiguration, diagnostics: Diagnostics) -> Bool {
        do {
            try AccessOptions.checkAllowOtherAvailable(for: configuration.access)
        } catch {
            diagnostics.report(error)
            diagnostics.hint("add user_allow_other to /etc/fuse.conf (as root), or mount as root")
            return false
        }
        do {
            try AccessOptions.checkCgroupsAvailable(for: configuration.access)
        } catch {
            diagnostics.report(error)
            return false
        }
        if let warning = AccessOptions.warning(for: configuration.access) { diagnostics.warning(warning) }
        return true
    }

    /// ``MountMode/remote(_:url:options:)``.
    private static func mountRemote(_ request: MountRequest, url: [UInt8], options: RemoteOptions,
                                    diagnostics: Diagnostics) -> Int32 {
        guard accessAvailable(request.configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        if request.configuration.lock.startsLocked {
            diagnostics.error("\(LockOptions.startLocked) is not supported for a remote bundle")
            diagnostics.hint("see encfs-mount --help")
            return ExitCode.usage
        }
        return RemoteMount.run(url: url, options: options, configuration: request.configuration, args: request.args,
                               openOptions: request.openOptions, diagnostics: diagnostics)
    }

    /// ``MountMode/foreground(_:)``: this process opens everything and
    /// serves.
    private static func mountInForeground(_ request: MountRequest, diagnostics: Diagnostics) -> Int32 {
        let configuration = request.configuration
        let materials: [KeyMaterial]
        switch startingMaterials(request, diagnostics: diagnostics) {
        case .success(let gathered): materials = gathered
        case .failure(let exit): return exit.code
        }
        // In the foreground this process serves: open everything.
        let reader: ReaderHandoff
        let source: FileByteSource
        do {
            // Handed over, not kept: a lock must drop the last reference.
            source = try FileByteSource(path: configuration.bundlePath)
            reader = ReaderHandoff(try BundleReader.open(source: source, materials: materials,
                                                         indexCacheBytes: configuration.indexCacheKB << 10,
                                                         options: request.openOptions))
        } catch {
            diagnostics.report(error, path: configuration.bundlePath)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.failure
        }
        guard let prepared = preparedForServing(configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        return serveInForeground(reader, source: source, prepared, options: request.openOptions, diagnostics: diagnostics)
    }

    /// ``MountMode/locked(_:)``: checks that the bundle is one (its
    /// header, which needs no key) and mounts it locked, in the background
    /// or not.
    private static func mountLocked(_ request: MountRequest, diagnostics: Diagnostics) -> Int32 {
        guard accessAvailable(request.configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        // No key is used; secrets in the environment still must not
        // reach the daemon's.
        _ = KeySources.takeEnvironment(KeySources.keyVariable)
        _ = KeySources.takeEnvironment(KeySources.passphraseVariable)
        let source: FileByteSource
        do {
            source = try FileByteSource(path: request.configuration.bundlePath)
            _ = try BundleReader.readHeader(source: source)
        } catch {
            diagnostics.report(error, path: request.configuration.bundlePath)
            return ExitCode.failure
        }
        guard let configuration = preparedForServing(request.configuration, diagnostics: diagnostics) else {
            return ExitCode.failure
        }
        if request.foreground {
            return serveInForeground(ReaderHandoff(nil), source: source, configuration, options: request.openOptions,
                                     diagnostics: diagnostics)
        }
        do {
            try MountDaemon.start(bundle: source.descriptor, contentKey: nil,
                                  arguments: MountDaemonCommandLine.arguments(for: configuration),
                                  mountpoint: configuration.mountpoint)
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: configuration.mountpoint)
            return ExitCode.failure
        }
    }

    /// What a remote bundle changes in `configuration` (more worker
    /// threads by default unless `threadsGiven`, reads waiting for the
    /// server limited to leave two free) and in its `remote` settings; the
    /// command and the daemon alike.
    ///
    /// - Throws: `UsageError` for `--transport uring`.
    static func adjust(_ configuration: inout MountConfiguration, remote options: inout RemoteOptions,
                       threadsGiven: Bool) throws {
        if !threadsGiven { configuration.threads = max(configuration.threads, RemoteMount.defaultThreads) }
        options.maximumWaitingReads = max(1, configuration.threads - 2)
        if configuration.transport == .required(.uring) {
            throw UsageError("--transport uring cannot serve a remote bundle (reads waiting on a stalled server would "
                             + "hold the io_uring queues): use --transport classic or leave --transport out")
        }
        configuration.waitsOnNetwork = true
    }

    /// Serves until unmounted or signalled, logging to stderr or the log file.
    static func serveInForeground(_ reader: ReaderHandoff, source: any ByteSource, _ configuration: MountConfiguration,
                                  options: OpenOptions, diagnostics: Diagnostics) -> Int32 {
        let logger: MountLogger
        if let logFile = configuration.logFile {
            do { logger = try MountLogger.appending(to: logFile) } catch {
                diagnostics.error("cannot use log file: \(error)", path: error.path)
                return ExitCode.failure
            }
        } else {
            logger = MountLogger(sink: .standardError)
        }
        logger.warnIfSecretsNotLocked()
        do {
            let session = try MountSession(reader: reader, source: source, options: options,
                                           configuration: configuration, logger: logger)
            // Type=notify: ready once mounted (requests queue until the
            // loop runs), stopping once the loop has ended.
            let notifier = ServiceNotifier.fromEnvironment()
            try session.serve(readaheadKB: configuration.readaheadKB) {
                notifier?.send(["READY=1", ServiceNotifier.status("serving", path: configuration.mountpoint)])
            }
            notifier?.send(["STOPPING=1", ServiceNotifier.status("unmounted", path: configuration.mountpoint)])
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: configuration.mountpoint)
            return ExitCode.failure
        }
    }

    // MARK: - Settings

    /// Read-ahead set when running as root and `--readahead` is not given:
    /// 1 MiB requests instead of the kernel's 128 KiB for sequential reads.
    static let defaultReadahead = 1024

    /// The serving settings in `args` (the daemon reads the same options
    /// back from ``MountDaemonCommandLine/arguments(for:remote:)``). Paths are as given.
    ///
    /// - Throws: `UsageError` for a missing operand or a value out of range.
    static func configuration(from args: ArgumentParser.Result) throws -> MountConfiguration {
        // With --address-file, MOUNTPOINT alone.
        let operands = args.has(RemoteCommandLine.addressFile) ? 1 : 2
        guard args.positionals.count == operands else {
            throw UsageError(args.positionals.count < operands ? (operands == 2 ? "missing BUNDLE or MOUNTPOINT" : "missing MOUNTPOINT")
                             : operands == 2 ? "too many arguments" : "BUNDLE and \(RemoteCommandLine.addressFile) given")
        }
        var configuration = MountConfiguration(bundlePath: try RemoteCommandLine.address(from: args) ?? args.positionals[0],
                                               mountpoint: args.positionals[operands - 1],
                                               indexCacheKB: IndexPages.defaultCacheBytes >> 10,
                                               threads: MountSession.defaultThreads)
        configuration.fuseOptions = args.values("-o").flatMap {
            String(decoding: $0, as: UTF8.self).split(separator: ",").map(String.init)
        }
        if let bad = configuration.fuseOptions.first(where: { $0.hasPrefix("fsname=") || $0.hasPrefix("max_read=") }) {
            throw UsageError("option -o \(bad) is not allowed (the mount is read-only and sets its own)")
        }
        configuration.logFile = args.value("--log-file")
        configuration.logNames = args.has("--log-names")
        configuration.allowsExternalSymlinks = args.has(ReaderOptions.allowExternalSymlinks)
        configuration.readaheadKB = getuid() == 0 ? defaultReadahead : nil
        if let text = args.value("--readahead") {
            configuration.readaheadKB = try number(text, in: 0...16384, "--readahead must be a number of KiB from 0 to 16384")
        }
        if let text = args.value("--index-cache") {
            let range = (IndexPages.minimumCacheBytes >> 10)...(1 << 20)
            configuration.indexCacheKB = try number(text, in: range,
                                                    "--index-cache must be a number of KiB from \(range.lowerBound) to \(range.upperBound)")
        }
        if let text = args.value("--threads") {
            configuration.threads = try number(text, in: 1...MountSession.maximumThreads,
                                               "--threads must be a number from 1 to \(MountSession.maximumThreads)")
        }
        if let text = args.value("--transport") {
            guard let choice = TransportChoice(rawValue: String(decoding: text, as: UTF8.self)) else {
                throw UsageError("--transport must be uring or classic")
            }
            configuration.transport = .required(choice)
        }
        if let text = args.value("--poll-us") {
            configuration.pollMicroseconds = try number(text, in: 0...RequestPoller.maximumMicroseconds,
                                                        "--poll-us must be a number of microseconds from 0 to \(RequestPoller.maximumMicroseconds)")
            configuration.pollMicrosecondsGiven = true
        }
        if configuration.transport == .required(.uring), configuration.fuseOptions.contains("auto_unmount") {
            throw UsageError("--transport uring cannot be used with -o auto_unmount (a killed daemon's rings keep "
                             + "fusermount3 from unmounting): use --transport classic or leave --transport out")
        }
        configuration.access = try AccessOptions.rules(from: args)
        // Without allow_other the kernel turns every other user away
        // before the policy is asked.
        if configuration.access.needsAllowOther(mountingUID: getuid(), mountingGID: getgid()),
           !configuration.fuseOptions.contains("allow_other") {
            configuration.fuseOptions.append("allow_other")
        }
        configuration.lock = try LockOptions.settings(from: args, inDaemon: args.has(MountDaemon.flag))
        return configuration
    }

    /// `text` as a number in `range`.
    ///
    /// - Throws: `UsageError(message)` otherwise.
    private static func number(_ text: [UInt8], in range: ClosedRange<Int>, _ message: String) throws -> Int {
        guard let n = Int(String(decoding: text, as: UTF8.self)), range.contains(n) else { throw UsageError(message) }
        return n
    }

    /// `configuration` with absolute paths (the daemon works from "/");
    /// a remote bundle's display name is left as it is.
    /// Creates the log file, so that one that cannot be written fails here
    /// with a message rather than later in the daemon.
    ///
    /// - Throws: `CommandError` naming the path.
    static func withAbsolutePaths(_ configuration: MountConfiguration) throws -> MountConfiguration {
        func absolute(_ path: [UInt8]) throws -> [UInt8] {
            do { return try LocalFiles.resolvedPath(path) } catch { throw CommandError("cannot resolve path", path: path) }
        }
        var resolved = configuration
        if !RemoteCommandLine.isRemote(configuration.bundlePath) { resolved.bundlePath = try absolute(configuration.bundlePath) }
        resolved.mountpoint = try absolute(configuration.mountpoint)
        resolved.access = try AccessOptions.resolvingExecutables(configuration.access)
        if let logFile = configuration.logFile {
            // Not resolved: a symbolic link must be seen, and refused, by
            // the open (MountLogger.appending(to:)).
            let path = try LocalFiles.absolutePath(logFile)
            do { _ = try MountLogger.appending(to: path) } catch {
                throw CommandError("cannot use log file: \(error)", path: error.path)
            }
            resolved.logFile = path
        }
        return resolved
    }

    /// `configuration` with its mountpoint checked and its paths made
    /// absolute (`withAbsolutePaths`), or nil after reporting why not: the
    /// last step before a mount is served, whichever way it is opened.
    static func preparedForServing(_ configuration: MountConfiguration, diagnostics: Diagnostics) -> MountConfiguration? {
        do {
            try checkMountpoint(configuration.mountpoint)
            let prepared = try withAbsolutePaths(configuration)
            for (message, path) in AccessOptions.replaceableExecutables(in: prepared.access) { diagnostics.warning(message, path: path) }
            return prepared
        } catch {
            diagnostics.report(error)
            return nil
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
}
