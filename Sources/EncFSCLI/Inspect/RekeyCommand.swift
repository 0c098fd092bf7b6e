import EncFSCore

/// `encfs-rekey BUNDLE …`, also spelled `encfs-inspect rekey BUNDLE …`:
/// changes a bundle's key slots (and signs it), replacing the file
/// atomically. The one command that writes a bundle rather than reading
/// it; the same options, exit codes and `--json` document either way.
package struct RekeyCommand: InspectSubcommand {
    /// The executable of its own.
    static let tool = "encfs-rekey"

    static let help = """
    usage: encfs-rekey BUNDLE [--add-recipient PUB]... [--add-key-file F]...
                       [--add-passphrase-file F]... [--remove FINGERPRINT]...
                       [--scrypt-log-n N] [--sign-key FILE] [--json] [key options]

    Changes the key slots of BUNDLE, replacing the file atomically (its mode,
    owner and group kept); the same command as encfs-inspect rekey. Refuses to
    remove the last slot. Adding only rewrites the header (content bytes
    identical). --remove revokes: it re-encrypts everything under a new content
    key and bundle id, so the removed secret opens nothing of the result
    (copies of the old file still open with it). Every kept slot is made again
    for the new key, so each needs its key: the one opening the bundle counts;
    give the others with --add-key-file, --add-passphrase-file or
    --add-recipient (the .pub: a slot does not store its public key), or remove
    them too; otherwise rekey refuses, listing them. A signature stays valid
    when adding; --remove drops it (with a warning) unless --sign-key signs the
    result. --sign-key alone signs the bundle.

    changes (at least one):
      --add-key-file FILE      add a slot for this raw key (64 hex characters);
                               repeatable
      --add-passphrase-file FILE
                               add a slot for this passphrase; repeatable
      --add-recipient PUB      add a slot for this public key (X25519 or RSA,
                               PEM, such as the .pub of encfs-keygen);
                               repeatable
      --remove FINGERPRINT     remove (revoke) the slot with this fingerprint
                               (encfs-inspect info lists them); repeatable
      --scrypt-log-n N         cost of new passphrase slots: scrypt N=2^N
                               (14 ... 20)
      --sign-key FILE          sign the result with this Ed25519 private key

    key options (to open the bundle; any one that opens a key slot is enough):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM) for recipient slots
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY / ENCFS_PASSPHRASE / ENCFS_IDENTITY when no key
      option is given; otherwise a passphrase prompt on a terminal.

    origin options (a bundle of another origin is not rekeyed):
    \(ReaderOptions.originHelp)

    reader options:
      --scrypt-max-memory SIZE most memory a passphrase slot's scrypt may need
                               before anything is authenticated, e.g. 512M, 2G
                               (default 1G, the costliest slot encfs-pack makes)
      --allow-external-symlinks
                               accepted, as by encfs-inspect; rekey keeps
                               symlinks as they are stored either way

    options:
      --json                   one JSON document on stdout (schema:
                               encfs-rekey(1)); errors stay on stderr
      --progress               draw progress on stderr even when it is not a
                               terminal (by default only on a terminal)
      -q, --quiet              no progress and no report on stdout, the exit
                               code tells; errors still show
      -h, --help               this text
      --version                print the version and exit

    exit codes: 0 success, 1 runtime failure (the bundle is left as it was),
    2 usage error
    """

    /// The options that say what to change; `encfs-inspect` accepts them too.
    static let changeOptions: [ArgumentParser.Option] = [
        .init(["--add-key-file"], takesValue: true),
        .init(["--add-passphrase-file"], takesValue: true),
        .init(["--add-recipient"], takesValue: true),
        .init(["--remove"], takesValue: true),
        .init(["--scrypt-log-n"], takesValue: true),
        .init(["--sign-key"], takesValue: true),
    ]

    /// `encfs-rekey`'s parser: the options that mean something to rekey.
    static let parser = ArgumentParser(options: [
        .init(["--json"], takesValue: false),
        .init(["--progress"], takesValue: false),
        .init(["--quiet", "-q"], takesValue: false),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ] + changeOptions + KeyOptions.parserOptions + ReaderOptions.parserOptions)

    /// Runs `encfs-rekey` and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        // As encfs-inspect: an address is refused, but its secrets leave
        // argv first.
        ProcessArguments.hideAddresses()
        let diagnostics = Diagnostics(tool: tool)
        let args: ArgumentParser.Result
        switch CommandLineStart.parse(arguments, with: parser, tool: tool, help: help, diagnostics: diagnostics) {
        case .exit(let status): return status
        case .run(let parsed): args = parsed
        }
        guard operandCount.contains(args.positionals.count) else {
            diagnostics.error(args.positionals.isEmpty ? "missing BUNDLE" : "too many arguments")
            diagnostics.hint("see \(tool) --help")
            return ExitCode.usage
        }
        return InspectCommand.run(Self.self, operands: args.positionals, args: args, diagnostics: diagnostics)
    }

    static let operandCount = 1...1

    let bundle: InspectedBundle
    let args: ArgumentParser.Result
    /// New passphrase slots' scrypt cost (2^N), when given.
    let scryptLogN: UInt8?
    let remove: [String]
    let json: Bool
    let quiet: Bool
    let forcesProgress: Bool

    /// - Throws: `UsageError` for an address (rekey writes a local file),
    ///   an scrypt cost out of range, or nothing to change.
    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) throws {
        guard !bundle.isRemote else { throw UsageError("rekey needs a local bundle file, not an address") }
        self.bundle = bundle
        self.args = args
        if let cost = args.value("--scrypt-log-n") {
            guard let n = UInt8(String(decoding: cost, as: UTF8.self)), (14...20).contains(n) else {
                throw UsageError("--scrypt-log-n must be between 14 and 20")
            }
            scryptLogN = n
        } else {
            scryptLogN = nil
        }
        remove = args.values("--remove").map { String(decoding: $0, as: UTF8.self) }
        guard ["--add-key-file", "--add-passphrase-file", "--add-recipient", "--remove", "--sign-key"].contains(where: args.has) else {
            throw UsageError("rekey needs --add-key-file, --add-passphrase-file, --add-recipient, --remove or --sign-key")
        }
        json = args.has("--json")
        quiet = args.has("--quiet")
        forcesProgress = args.has("--progress")
    }

    /// The changes asked for, with the key files they name read (in the
    /// order given on the command line, kind by kind).
    private func changes() throws -> BundleRekeyer.Changes {
        var changes = BundleRekeyer.Changes()
        if let scryptLogN { changes.scrypt.logN = scryptLogN }
        changes.remove = remove
        for path in args.values("--add-key-file") { changes.addKeys.append(.rawKey(try KeyFiles.readKeyFile(path))) }
        for path in args.values("--add-passphrase-file") {
            changes.addKeys.append(.passphrase(try KeyFiles.readPassphraseFile(path)))
        }
        changes.addRecipients = try args.values("--add-recipient").map { try KeyFiles.readRecipientFile($0) }
        if let path = args.value("--sign-key") { changes.signingKey = try KeyFiles.readSigningKeyFile(path) }
        return changes
    }

    func run(diagnostics: Diagnostics) throws -> Int32 {
        var changes = try changes()
        changes.openedWith = try KeyOptions.gather(from: args, confirm: false)
        // Rekeying rewrites the bundle, it serves nothing: links are kept as
        // they are. With --verify-key / --expect-bundle-id (in `options`),
        // only a bundle of that origin is rekeyed.
        let reader = try BundleReader.open(path: bundle.path, materials: changes.openedWith, options: bundle.optionsShowingEverything)
        let outcome: BundleRekeyer.Outcome
        let display = ProgressDisplay.make(tool: diagnostics.tool, forced: forcesProgress, quiet: quiet)
        changes.progress = display?.progress
        do {
            defer { display?.finish() }
            outcome = try BundleRekeyer.rekey(path: bundle.path, reader: reader, changes: changes)
        } catch let e as BundleError {
            report(e, diagnostics: diagnostics)
            return ExitCode.failure
        }
        let out = OutputStream()
        if json {
            out.write(InspectCommand.rekeyJSON(outcome).serialized)
        } else if !quiet {
            out.line(Self.summary(outcome))
            for slot in outcome.slots { out.line("  \(slot.kindName) \(slot.fingerprint)") }
        }
        switch outcome.signature {
        case .none: break
        case .kept: if !json { out.line("signature kept (it covers the content, which did not change)") }
        case .signed(let fingerprint): if !json { out.line("signed by \(fingerprint)") }
        case .dropped:
            out.flush()
            diagnostics.warning("the bundle signature was dropped: removing a slot re-encrypts under a new content key "
                                + "and bundle id, which it does not cover", path: bundle.path)
            diagnostics.hint("sign the result with \(spelling(diagnostics)) BUNDLE --sign-key FILE, or give --sign-key with --remove")
        }
        return ExitCode.success
    }

    /// `rekeyed: 1 slots added, 0 removed, 2 now:` (and what re-encrypting did).
    private static func summary(_ outcome: BundleRekeyer.Outcome) -> String {
        guard outcome.reencrypted else {
            return "rekeyed: \(outcome.added) slots added, \(outcome.removed) removed, \(outcome.slots.count) now:"
        }
        return "rekeyed: \(outcome.added) slots added, \(outcome.removed) removed, \(outcome.carriedOver) carried over, "
            + "\(outcome.slots.count) now; re-encrypted under a new content key and bundle id:"
    }

    /// A failure of the rekeying itself (the bundle is left as it was),
    /// with what to do about it.
    private func report(_ error: BundleError, diagnostics: Diagnostics) {
        diagnostics.error(error.message, path: error.path ?? bundle.path)
        switch error {
        case .slotsNotCarriedOver:
            diagnostics.hint("give each with --add-key-file, --add-passphrase-file or --add-recipient (its .pub file), "
                             + "or remove it too with --remove FINGERPRINT")
        case .corruptChunk, .corruptIndex:
            diagnostics.hint("the bundle is damaged and was left as it was; encfs-inspect verify lists the damaged files")
        default:
            break
        }
    }

    /// How the user called this command, for a hint to run it again.
    private func spelling(_ diagnostics: Diagnostics) -> String {
        diagnostics.tool == Self.tool ? Self.tool : "encfs-inspect rekey"
    }
}
