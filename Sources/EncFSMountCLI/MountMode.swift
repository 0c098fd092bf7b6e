import EncFSCLI
import EncFSCore
import EncFSMount
import EncFSRemote

/// What one `encfs-mount` invocation does, decided from its arguments
/// alone, before anything is opened or a key is asked for;
/// ``MountCommand/run(_:)`` gives each case a function of its own. (The
/// mount daemon is not a mode: it has its own entry,
/// ``MountDaemonCommandLine``.)
enum MountMode {
    /// `--help`: print the help.
    case help
    /// `--version`: print the version lines.
    case version
    /// An `http://` or `https://` bundle (as BUNDLE or `--address-file`),
    /// in the background or with `-f`: `url` is its address (a secret).
    case remote(MountRequest, url: [UInt8], options: RemoteOptions)
    /// `--start-locked` on a local bundle: mounted without a key.
    case locked(MountRequest)
    /// A local bundle served by a daemon, the command returning once it
    /// serves (no `-f`).
    case background(MountRequest)
    /// A local bundle served by this process until unmounted (`-f`).
    case foreground(MountRequest)

    /// The mode `arguments` (argv without the program) ask for.
    ///
    /// - Throws: `UsageError` for options that do not parse or values out
    ///   of range; `KeyInputError` for a `--verify-key` file that cannot
    ///   be used (a runtime failure).
    init(arguments: [[UInt8]]) throws {
        let parser = MountCommand.parser
        // fstab: every long option also as -o name=value.
        let args = try parser.expandingMountOptions(try parser.parse(arguments))
        if args.has("--help") {
            self = .help
            return
        }
        if args.has(VersionOption.option.names[0]) {
            self = .version
            return
        }
        var configuration = try MountCommand.configuration(from: args)
        let openOptions = try ReaderOptions.openOptions(from: args)
        if RemoteCommandLine.isRemote(configuration.bundlePath) {
            let url = configuration.bundlePath
            var options = try RemoteCommandLine.options(from: args)
            configuration.bundlePath = try RemoteLocation(configuration.bundlePath).displayName
            try MountCommand.adjust(&configuration, remote: &options, threadsGiven: args.has("--threads"))
            configuration.origin = openOptions.origin
            self = .remote(MountRequest(args: args, configuration: configuration, openOptions: openOptions), url: url, options: options)
            return
        }
        // The daemon checks the origin again (it reads the index a
        // signature covers): it travels in the configuration.
        configuration.origin = openOptions.origin
        let request = MountRequest(args: args, configuration: configuration, openOptions: openOptions)
        if configuration.lock.startsLocked {
            self = .locked(request)
        } else {
            self = args.has("--foreground") ? .foreground(request) : .background(request)
        }
    }
}

/// What every mounting mode starts from: the parsed arguments (the key
/// options are read from them only once the mode needs a key), the
/// serving settings and the reader's options.
struct MountRequest {
    let args: ArgumentParser.Result
    let configuration: MountConfiguration
    let openOptions: OpenOptions

    /// `-f`.
    var foreground: Bool { args.has("--foreground") }
}
