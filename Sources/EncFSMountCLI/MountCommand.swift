import EncFSCore
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

    static let parser = ArgumentParser(options: [
        .init(["--foreground", "-f"], takesValue: false),
        .init(["-o"], takesValue: true),
        .init(["--log-file"], takesValue: true),
        .init(["--log-names"], takesValue: false),
        .init(["--readahead"], takesValue: true),
        .init(["--index-cache"], takesValue: true),
        .init(["--threads"], takesValue: true),
        .init(["--transport"], takesValue: true),
        .init(["--poll-us"], takesValue: true),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
        .init([MountDaemon.flag], takesValue: false),
        .init([RemoteCommandLine.addressFile], takesValue: true),
    ] + KeyOptions.parserOptions + ReaderOptions.parserOptions + AccessOptions.parserOptions + RemoteCommandLine.parserOptions
        + LockOptions.parserOptions)

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-mount")
        let args: ArgumentParser.Result
        var configuration: MountConfiguration
        let openOptions: OpenOptions
        // A remote bundle: its address (secret) and settings; the
        // configuration then names it by its display name only.
        var remote: (url: [UInt8], options: RemoteOptions)?
        // Before anything else: with -f this process serves for the
        // mount's life, and its argv is anyone's to read.
        ProcessArguments.hideAddresses()
        do {
            // fstab: every long option also as -o name=value.
            args = try parser.expandingMountOptions(try parser.parse(arguments))
            if args.has("--help") {
                print(help)
                return ExitCode.success
            }
            if VersionOption.handle(args, tool: "encfs-mount") { return ExitCode.success }
            configuration = try self.configuration(from: args)
            openOptions = try ReaderOptions.openOptions(from: args)
            if args.has(RemoteCommandLine.daemonRemote) || RemoteCommandLine.isRemote(configuration.bundlePath) {
                remote = (configuration.bundlePath, try remoteOptions(from: args, configuration: &configuration))
            }
        } catch {
            diagnostics.report(error)
            // A verifying key file that cannot be read is a runtime failure.
            guard error is UsageError else { return ExitCode.failure }
            diagnostics.hint("see encfs-mount --help")
            return ExitCode.usage
        }
        // The daemon checks the origin again (it reads the index a
        // signature covers): it travels in the configuration.
        configuration.origin = openOptions.origin
        if args.has(MountDaemon.flag) {
            if let remote {
                return MountDaemon.serve(configuration) { try RemoteMount.receive(from: $0, options: remote.options) }
                    ? ExitCode.success : ExitCode.failure
            }
            return MountDaemon.serve(configuration) ? ExitCode.success : ExitCode.failure
        }
        do {
            try AccessOptions.checkAllowOtherAvailable(for: configuration.access)
        } catch {
            diagnostics.report(error)
            diagnostics.hint("add user_allow_other to /etc/fuse.conf (as root), or mount as root")
            return ExitCode.failure
        }
        do {
            try AccessOptions.checkCgroupsAvailable(for: configuration.access)
        } catch {
            diagnostics.report(error)
            return ExitCode.failure
        }
        if let warning = AccessOptions.warning(for: configuration.access) { diagnostics.warning(warning) }
        if let remote {
            if configuration.lock.startsLocked {
                diagnostics.error("\(LockOptions.startLocked) is not supported for a remote bundle")
                diagnostics.hint("see encfs-mount --help")
                return ExitCode.usage
            }
            return RemoteMount.run(url: remote.url, options: remote.options, configuration: configuration, args: args,
                                   openOptions: openOptions, diagnostics: diagnostics)
        }
        if configuration.lock.startsLocked {
            // No key is used; secrets in the environment still must not
            // reach the daemon's.
            _ = KeySources.takeEnvironment(KeySources.keyVariable)
            _ = KeySources.takeEnvironment(KeySources.passphraseVariable)
            return mountLocked(configuration, foreground: args.has("--foreground"), options: openOptions, diagnostics: diagnostics)
        }
        let materials: [KeyMaterial]
        do {
            materials = try KeyOptions.gather(from: args, confirm: false)
        } catch {
            diagnostics.report(error)
            return ExitCode.code(for: error)
        }
        if !args.has("--foreground") {
            return mountInBackground(configuration, materials: materials, options: openOptions, diagnostics: diagnostics)
        }
        // In the foreground this process serves: open everything.
        let reader: ReaderHandoff
        let source: FileByteSource
        do {
            // Handed over, not kept: a lock must drop the last reference.
            source = try FileByteSource(path: configuration.bundlePath)
            reader = ReaderHandoff(try BundleReader.open(source: source, materials: materials,
                                                         indexCacheBytes: configuration.indexCacheKB << 10, options: openOptions))
        } catch {
            diagnostics.report(error, path: configuration.bundlePath)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.failure
        }
        guard let prepared = preparedForServing(configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        return serveInForeground(reader, source: source, prepared, options: openOptions, diagnostics: diagnostics)
    }

    /// `--start-locked`: checks that the bundle is one (its header, which
    /// needs no key) and mounts it locked, in the background or not.
    private static func mountLocked(_ configuration: MountConfiguration, foreground: Bool, options: OpenOptions,
                                    diagnostics: Diagnostics) -> Int32 {
        let source: FileByteSource
        var configuration = configuration
        do {
            source = try FileByteSource(path: configuration.bundlePath)
            _ = try BundleReader.readHeader(source: source)
        } catch {
            diagnostics.report(error, path: configuration.bundlePath)
            return ExitCode.failure
        }
        guard let prepared = preparedForServing(configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        configuration = prepared
        if foreground {
            return serveInForeground(ReaderHandoff(nil), source: source, configuration, options: options, diagnostics: diagnostics)
        }
        do {
            try MountDaemon.start(bundle: source.descriptor, contentKey: nil, arguments: daemonArguments(configuration),
                                  mountpoint: configuration.mountpoint)
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: configuration.mountpoint)
            return ExitCode.failure
        }
    }

    /// The remote settings, and what they change in `configuration`: the
    /// bundle named by its display name, more worker threads by default,
    /// and reads waiting for the server limited to leave two free.
    private static func remoteOptions(from args: ArgumentParser.Result,
                                      configuration: inout MountConfiguration) throws -> RemoteOptions {
        var options = try RemoteCommandLine.options(from: args)
        if args.has(RemoteCommandLine.daemonRemote) {
            // The command wrote every setting; no default to compute again.
            if !args.has(RemoteCommandLine.cacheDir) { options.cacheDirectory = nil }
        } else {
            configuration.bundlePath = try RemoteLocation(configuration.bundlePath).displayName
        }
        if !args.has("--threads") { configuration.threads = max(configuration.threads, RemoteMount.defaultThreads) }
        options.maximumWaitingReads = max(1, configuration.threads - 2)
        if configuration.transport == .required(.uring) {
            throw UsageError("--transport uring cannot serve a remote bundle (reads waiting on a stalled server would "
                             + "hold the io_uring queues): use --transport classic or leave --transport out")
        }
        configuration.waitsOnNetwork = true
        return options
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
    /// back from ``daemonArguments(_:)``). Paths are as given.
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
        configuration.lock = try LockOptions.settings(from: args)
        return configuration
    }

    /// The daemon's argv after `MountDaemon.flag`: every setting of
    /// `configuration` written as the options ``configuration(from:)``
    /// reads back. A new option that changes how the daemon serves is
    /// added in both functions (MountCommandTests checks the round trip).
    /// Key options never appear: the key goes through a pipe.
    static func daemonArguments(_ configuration: MountConfiguration) -> [[UInt8]] {
        var out: [[UInt8]] = []
        func add(_ name: String, _ value: [UInt8]? = nil) {
            out.append(Array(name.utf8))
            if let value { out.append(value) }
        }
        for option in configuration.fuseOptions { add("-o", Array(option.utf8)) }
        if let logFile = configuration.logFile { add("--log-file", logFile) }
        if configuration.logNames { add("--log-names") }
        // The daemon loads the index, so it is the one that checks symlinks.
        if configuration.allowsExternalSymlinks { add(ReaderOptions.allowExternalSymlinks) }
        if let kb = configuration.readaheadKB { add("--readahead", Array(String(kb).utf8)) }
        add("--index-cache", Array(String(configuration.indexCacheKB).utf8))
        add("--threads", Array(String(configuration.threads).utf8))
        if case .required(let choice) = configuration.transport { add("--transport", Array(choice.rawValue.utf8)) }
        if configuration.pollMicrosecondsGiven { add("--poll-us", Array(String(configuration.pollMicroseconds).utf8)) }
        out += ReaderOptions.daemonArguments(forOrigin: configuration.origin)
        out += AccessOptions.daemonArguments(for: configuration.access)
        out += LockOptions.daemonArguments(configuration.lock)
        add("--")
        return out + [configuration.bundlePath, configuration.mountpoint]
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
            do { return try FileIO.resolvedPath(path) } catch { throw CommandError("cannot resolve path", path: path) }
        }
        var resolved = configuration
        if !RemoteCommandLine.isRemote(configuration.bundlePath) { resolved.bundlePath = try absolute(configuration.bundlePath) }
        resolved.mountpoint = try absolute(configuration.mountpoint)
        resolved.access = try AccessOptions.resolvingExecutables(configuration.access)
        if let logFile = configuration.logFile {
            // Not resolved: a symbolic link must be seen, and refused, by
            // the open (MountLogger.appending(to:)).
            let path = try FileIO.absolutePath(logFile)
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
