import EncFSCLI
import EncFSCore
import EncFSMount
import EncFSRemote

/// The mount daemon's command line, both ends of it: what the command
/// writes after ``MountDaemon/flag`` (``arguments(for:remote:)``) and the
/// daemon's own small parser that reads it back (``settings(from:)``).
/// They sit together so that they cannot drift: a setting that changes
/// how the daemon serves is added to both here (MountCommandTests checks
/// the round trip). Key options never appear: the key goes through a pipe,
/// and a remote bundle's address and headers through another.
///
/// The daemon is `encfs-mount` started again by ``MountDaemon`` with the
/// flag first; nothing else reaches it, so none of the command's
/// user-facing handling (fstab `-o` spellings, help, version, prompts)
/// applies here.
enum MountDaemonCommandLine {
    /// What the daemon serves with.
    struct Settings {
        var configuration: MountConfiguration
        /// Set for a remote bundle: its settings other than the secrets.
        var remote: RemoteOptions?
    }

    /// Only the options ``arguments(for:remote:)`` writes.
    static let parser = ArgumentParser(options: [.init([MountDaemon.flag], takesValue: false)]
        + MountCommand.servingOptions
        + [.init([ReaderOptions.allowExternalSymlinks], takesValue: false)] + ReaderOptions.originParserOptions
        + AccessOptions.parserOptions + LockOptions.parserOptions + RemoteCommandLine.parserOptions)

    /// Whether `arguments` (argv without the program) start the daemon:
    /// ``MountDaemon`` puts its flag first.
    static func isDaemon(_ arguments: [[UInt8]]) -> Bool {
        arguments.first.map { $0 == Array(MountDaemon.flag.utf8) } ?? false
    }

    /// The daemon's argv after ``MountDaemon/flag``: every setting of
    /// `configuration` written as the options ``settings(from:)`` reads
    /// back, and for a remote bundle its non-secret `remote` settings.
    static func arguments(for configuration: MountConfiguration, remote: RemoteOptions? = nil) -> [[UInt8]] {
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
        if let remote { out += RemoteCommandLine.daemonArguments(remote) }
        add("--")
        return out + [configuration.bundlePath, configuration.mountpoint]
    }

    /// Reads back what ``arguments(for:remote:)`` wrote, with
    /// ``MountDaemon/flag`` in front, by the same rules the command reads
    /// its own options with (``MountCommand/configuration(from:)``).
    ///
    /// - Throws: `UsageError` for anything the command would not have written.
    static func settings(from arguments: [[UInt8]]) throws -> Settings {
        let args = try parser.parse(arguments)
        var configuration = try MountCommand.configuration(from: args)
        // The daemon checks the origin again (it reads the index a
        // signature covers).
        configuration.origin = try ReaderOptions.origin(from: args)
        guard args.has(RemoteCommandLine.daemonRemote) else { return Settings(configuration: configuration) }
        var remote = try RemoteCommandLine.options(from: args)
        // The command wrote every setting; no default to compute again.
        if !args.has(RemoteCommandLine.cacheDir) { remote.cacheDirectory = nil }
        try MountCommand.adjust(&configuration, remote: &remote, threadsGiven: args.has("--threads"))
        return Settings(configuration: configuration, remote: remote)
    }

    /// The daemon's whole life: reads its settings, then serves (the key
    /// and, for a remote bundle, its address come through pipes).
    ///
    /// - Returns: the exit code.
    static func run(_ arguments: [[UInt8]], diagnostics: Diagnostics) -> Int32 {
        let settings: Settings
        do {
            settings = try self.settings(from: arguments)
        } catch {
            return MountCommand.argumentFailure(error, diagnostics: diagnostics)
        }
        if let remote = settings.remote {
            return MountDaemon.serve(settings.configuration) {
                try RemoteMount.receive(from: $0, options: remote, logFile: settings.configuration.logFile)
            }
                ? ExitCode.success : ExitCode.failure
        }
        return MountDaemon.serve(settings.configuration) ? ExitCode.success : ExitCode.failure
    }
}
