import EncFSCore

/// `encfs-inspect info|ls|cat|verify|rekey …`: looks inside a bundle file
/// without FUSE.
///
/// This file parses the command line and hands it to the command named
/// first, a type of its own (`InspectInfo`, `InspectList`, `InspectCat`,
/// `InspectVerify`, `RekeyCommand`, which is also `encfs-rekey`), and
/// holds what they share: opening the bundle (`InspectedBundle`) and
/// reporting a failure.
package enum InspectCommand {
    static let help = """
    usage: encfs-inspect COMMAND BUNDLE [args] [key options]

    commands:
      info BUNDLE [--json]          format version, bundle id, chunk size, key
                                    slots and their fingerprints, size, signer;
                                    with a key also counts, total plaintext
                                    size, stored size, deduplicated bytes,
                                    creation time; with --verify-key it
                                    checks the signature (without a key: over
                                    the header and index, not the content key)
      ls [-l] [-R] [--json] BUNDLE [PATH]
                                    list a directory (default: the root); names
                                    show control bytes and bytes that are not
                                    UTF-8 as \\xNN, a backslash as \\\\; -l on a
                                    format version 2 bundle adds, after the
                                    size, the bytes the file takes in the
                                    bundle (compressed; shared bodies shown
                                    for each file)
      cat BUNDLE PATH               write a file's plaintext to stdout, chunk by
                                    chunk, in bounded memory
      verify BUNDLE [--json]        authenticate the header, the index and every
                                    chunk; exit 1 listing each damaged file and
                                    chunk range, files that share a file id, and
                                    symlinks that point outside the bundle
                                    (listed, not counted, with
                                    --allow-external-symlinks); for a signed
                                    bundle also every chunk against the
                                    signature (exit 1 if they differ)
      rekey BUNDLE [--add-recipient PUB]... [--add-key-file F]...
                   [--add-passphrase-file F]... [--remove FINGERPRINT]...
                   [--scrypt-log-n N] [--sign-key FILE] [--json]
                                    change key slots, replacing the file
                                    atomically; refuses to remove the last slot.
                                    Adding only rewrites the header (content
                                    bytes identical). --remove revokes: it
                                    re-encrypts everything under a new content
                                    key and bundle id, so the removed secret
                                    opens nothing of the result (copies of the
                                    old file still open with it). Every kept
                                    slot is made again for the new key, so each
                                    needs its key: the one opening the bundle
                                    counts; give the others with --add-key-file,
                                    --add-passphrase-file or --add-recipient
                                    (the .pub: a slot does not store its public
                                    key), or remove them too; otherwise rekey
                                    refuses, listing them. A signature stays
                                    valid when adding; --remove drops it (with
                                    a warning) unless --sign-key signs the
                                    result. --sign-key alone signs the bundle.
                                    Also a command of its own: encfs-rekey

    key options (to open the bundle; any one that opens a key slot is enough):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM) for recipient slots
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY / ENCFS_PASSPHRASE / ENCFS_IDENTITY when no key
      option is given; otherwise a passphrase prompt on a terminal (`info`
      never prompts: without a key it shows the header only).

    reader options:
    \(ReaderOptions.help)

    BUNDLE may be an http:// or https:// address for info, ls, cat and verify
    (rekey writes a local file).
    \(RemoteCommandLine.help)

    origin options (every command; rekey refuses to rekey a bundle of
    another origin):
    \(ReaderOptions.originHelp)

    options:
      --json                   info, ls, verify, rekey: one JSON document on
                               stdout (schema: encfs-inspect(1)); errors stay
                               on stderr
      --progress               verify, rekey: draw progress on stderr even
                               when it is not a terminal (by default only on
                               a terminal)
      -q, --quiet              verify, rekey: no progress and no report on
                               stdout, the exit code tells; errors still show
      -h, --help               this text
      --version                print the version and exit

    exit codes: 0 success, 1 runtime failure (or damage found by verify),
    2 usage error
    """

    /// Every command's options in one parser: an option is accepted
    /// whichever command it comes with, and means nothing to the others.
    static let parser = ArgumentParser(options: [
        .init(["--json"], takesValue: false),
        .init(["--progress"], takesValue: false),
        .init(["--quiet", "-q"], takesValue: false),
        .init(["-l"], takesValue: false),
        .init(["-R"], takesValue: false),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ] + RekeyCommand.changeOptions + KeyOptions.parserOptions + ReaderOptions.parserOptions + RemoteCommandLine.parserOptions)

    /// The commands, by the name that selects them.
    static var commands: [(name: String, type: any InspectSubcommand.Type)] {
        [("info", InspectInfo.self), ("ls", InspectList.self), ("cat", InspectCat.self),
         ("verify", InspectVerify.self), ("rekey", RekeyCommand.self)]
    }

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        // An address's secrets leave argv at once (cat of a large file
        // runs for a while).
        ProcessArguments.hideAddresses()
        let diagnostics = Diagnostics(tool: "encfs-inspect")
        let args: ArgumentParser.Result
        switch CommandLineStart.parse(arguments, with: parser, tool: "encfs-inspect", help: help, diagnostics: diagnostics) {
        case .exit(let status): return status
        case .run(let parsed): args = parsed
        }
        guard let name = args.positionals.first.map({ String(decoding: $0, as: UTF8.self) }) else {
            diagnostics.error("missing command")
            diagnostics.hint("see encfs-inspect --help")
            return ExitCode.usage
        }
        guard let command = commands.first(where: { $0.name == name })?.type else {
            diagnostics.error("unknown command \(name)")
            diagnostics.hint("commands: \(commands.map(\.name).joined(separator: ", "))")
            return ExitCode.usage
        }
        let operands = Array(args.positionals.dropFirst())
        guard command.operandCount.contains(operands.count) else {
            diagnostics.error(operands.count < command.operandCount.lowerBound ? "missing argument for \(name)"
                                                                              : "too many arguments for \(name)")
            diagnostics.hint("see encfs-inspect --help")
            return ExitCode.usage
        }
        return run(command, operands: operands, args: args, diagnostics: diagnostics)
    }

    /// Resolves `command`'s arguments and runs it; a failure is reported
    /// as one line naming the bundle (an address without its query
    /// string), with a hint where there is one.
    ///
    /// - Parameter operands: BUNDLE first, then the command's other
    ///   operands, as many as it takes.
    static func run(_ command: any InspectSubcommand.Type, operands: [[UInt8]], args: ArgumentParser.Result,
                    diagnostics: Diagnostics) -> Int32 {
        let bundle = operands[0]
        do {
            let target = InspectedBundle(path: bundle, args: args, options: try ReaderOptions.openOptions(from: args))
            return try command.init(bundle: target, operands: Array(operands.dropFirst()), args: args).run(diagnostics: diagnostics)
        } catch {
            diagnostics.report(error, path: RemoteCommandLine.shown(bundle))
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.code(for: error)
        }
    }
}

/// One command of `encfs-inspect`: it resolves its own operands and
/// options from the parsed command line, then runs.
protocol InspectSubcommand {
    /// How many operands it takes, BUNDLE included.
    static var operandCount: ClosedRange<Int> { get }

    /// Reads its operands (those after BUNDLE) and options.
    ///
    /// - Throws: `UsageError` for an operand or option it cannot take.
    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) throws

    /// Runs the command.
    ///
    /// - Returns: its exit code (`ExitCode`).
    /// - Throws: what stops it; the caller reports it and chooses the code.
    func run(diagnostics: Diagnostics) throws -> Int32
}

/// The bundle a command works on and what opens it: the key and remote
/// options as given (read when the command runs, since a key may be a
/// prompt), and the reader options.
struct InspectedBundle {
    /// BUNDLE as given: a path, or an http(s) address.
    let path: [UInt8]
    let args: ArgumentParser.Result
    let options: OpenOptions

    /// Whether BUNDLE is an address rather than a file.
    var isRemote: Bool { RemoteCommandLine.isRemote(path) }

    /// The bundle's bytes: a local file, or the remote bundle at an
    /// address (with the remote options; never for rekey, which writes a
    /// file).
    func source() throws -> any ByteSource {
        guard isRemote else { return try FileByteSource(path: path) }
        return try RemoteCommandLine.source(for: path, options: try RemoteCommandLine.options(from: args), args: args)
    }

    /// Opens the bundle with the key options (prompting on a terminal when
    /// none is given).
    func open() throws -> BundleReader {
        let materials = try KeyOptions.gather(from: args, confirm: false)
        return try BundleReader.open(source: try source(), materials: materials, options: optionsShowingEverything)
    }

    /// The reader options with symlinks that point outside the bundle
    /// accepted whatever was given: the tools show them (`ls`), report
    /// them (`verify`) or keep them (`rekey`), and `cat` refuses to follow
    /// them.
    var optionsShowingEverything: OpenOptions {
        var shown = options
        shown.allowsExternalSymlinks = true
        return shown
    }

    /// Looks `path` up in the index. A failure names the path inside the
    /// bundle, not the bundle file: "no such file or directory
    /// (app.bundle)" would say the bundle is missing.
    static func resolve(_ path: [UInt8], in index: BundleIndex, followingLast: Bool = false) throws -> IndexEntry {
        do {
            return try index.resolve(path: path, followingLast: followingLast)
        } catch BundleError.notFound {
            throw CommandError("no such file or directory in the bundle", path: path)
        } catch let e as BundleError {
            throw CommandError(e.message, path: path)
        }
    }
}
