import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-inspect info|ls|cat|verify|rekey …`: looks inside a bundle file
/// without FUSE.
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
                                    result. --sign-key alone signs the bundle

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

    static let parser = ArgumentParser(options: [
        .init(["--json"], takesValue: false),
        .init(["--progress"], takesValue: false),
        .init(["--quiet", "-q"], takesValue: false),
        .init(["-l"], takesValue: false),
        .init(["-R"], takesValue: false),
        .init(["--add-key-file"], takesValue: true),
        .init(["--add-passphrase-file"], takesValue: true),
        .init(["--add-recipient"], takesValue: true),
        .init(["--remove"], takesValue: true),
        .init(["--scrypt-log-n"], takesValue: true),
        .init(["--sign-key"], takesValue: true),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ] + KeyOptions.parserOptions + ReaderOptions.parserOptions + RemoteCommandLine.parserOptions)

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        // An address's secrets leave argv at once (cat of a large file
        // runs for a while).
        ProcessArguments.hideAddresses()
        let diagnostics = Diagnostics(tool: "encfs-inspect")
        let args: ArgumentParser.Result
        do {
            args = try parser.parse(arguments)
        } catch {
            diagnostics.report(error)
            diagnostics.hint("see encfs-inspect --help")
            return ExitCode.usage
        }
        if args.has("--help") {
            print(help)
            return ExitCode.success
        }
        if VersionOption.handle(args, tool: "encfs-inspect") { return ExitCode.success }
        guard let command = args.positionals.first.map({ String(decoding: $0, as: UTF8.self) }) else {
            diagnostics.error("missing command")
            diagnostics.hint("see encfs-inspect --help")
            return ExitCode.usage
        }
        let rest = Array(args.positionals.dropFirst())
        let expected: ClosedRange<Int>
        switch command {
        case "info", "verify", "rekey": expected = 1...1
        case "ls": expected = 1...2
        case "cat": expected = 2...2
        default:
            diagnostics.error("unknown command \(command)")
            diagnostics.hint("commands: info, ls, cat, verify, rekey")
            return ExitCode.usage
        }
        guard expected.contains(rest.count) else {
            diagnostics.error(rest.count < expected.lowerBound ? "missing argument for \(command)" : "too many arguments for \(command)")
            diagnostics.hint("see encfs-inspect --help")
            return ExitCode.usage
        }
        let bundle = rest[0]
        do {
            let options = try ReaderOptions.openOptions(from: args)
            switch command {
            case "info": return try info(bundle, args: args, options: options)
            case "ls": return try list(bundle, path: rest.count > 1 ? rest[1] : [], args: args, options: options,
                                       diagnostics: diagnostics)
            case "cat": return try cat(bundle, path: rest[1], args: args, options: options)
            case "verify": return try verify(bundle, args: args, options: options, diagnostics: diagnostics)
            default:
                guard !RemoteCommandLine.isRemote(bundle) else { throw UsageError("rekey needs a local bundle file, not an address") }
                return try rekey(bundle, args: args, options: options, diagnostics: diagnostics)
            }
        } catch {
            // An address is shown without its query string.
            diagnostics.report(error, path: RemoteCommandLine.shown(bundle))
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.code(for: error)
        }
    }

    /// The bundle's bytes: a local file, or the remote bundle at an address
    /// (with the remote options; never for rekey, which writes a file).
    private static func source(_ bundle: [UInt8], args: ArgumentParser.Result) throws -> any ByteSource {
        guard RemoteCommandLine.isRemote(bundle) else { return try FileByteSource(path: bundle) }
        return try RemoteCommandLine.source(for: bundle, options: try RemoteCommandLine.options(from: args))
    }

    /// Opens the bundle. Symlinks that point outside it are accepted here
    /// whatever `options` say: the tools show them (`ls`) or report them
    /// (`verify`), and `cat` refuses to follow them.
    private static func open(_ bundle: [UInt8], args: ArgumentParser.Result, options: OpenOptions) throws -> BundleReader {
        let materials = try KeyOptions.gather(from: args, confirm: false)
        return try BundleReader.open(source: try source(bundle, args: args), materials: materials,
                                     options: showingEverything(options))
    }

    private static func showingEverything(_ options: OpenOptions) -> OpenOptions {
        var shown = options
        shown.allowsExternalSymlinks = true
        return shown
    }

    // MARK: - info

    private static func info(_ bundle: [UInt8], args: ArgumentParser.Result, options: OpenOptions) throws -> Int32 {
        let materials = try KeyOptions.gather(from: args, confirm: false, optional: true)
        let header: BundleHeader
        let size: UInt64
        var reader: BundleReader?
        if materials.isEmpty {
            let source = try source(bundle, args: args)
            (header, size) = try BundleReader.readHeader(source: source)
            _ = try options.origin.checkWithoutKey(header: header, source: source)
        } else {
            let opened = try BundleReader.open(source: try source(bundle, args: args), materials: materials,
                                               options: showingEverything(options))
            reader = opened
            header = opened.header
            size = opened.bundleSize
        }
        let signature = SignatureStatus(header: header, verified: options.origin.signers.isEmpty ? nil : reader != nil)
        var counts = (files: 0, directories: 0, symlinks: 0)
        if let index = reader?.index {
            for position in 0..<index.count {
                switch try index.entry(at: position).kind {
                case .file: counts.files += 1
                case .directory: counts.directories += 1
                case .symlink: counts.symlinks += 1
                }
            }
            counts.directories -= 1 // the root
        }
        let out = OutputStream()
        if args.has("--json") {
            out.write(infoJSON(header: header, size: size, reader: reader, signature: signature, counts: counts).serialized)
            return ExitCode.success
        }
        out.line("format version: \(header.features.formatVersion)")
        out.line("compression:    \(compressionText(header.features))")
        out.line("bundle id:      \(Hex.encode(header.bundleID))")
        out.line("chunk size:     \(header.layout.chunkSize) (\(formatBytes(header.layout.chunkSize)))")
        out.line("bundle size:    \(size) (\(formatBytes(size)))")
        out.line("signature:      \(signature.text)")
        out.line("key slots:      \(header.keySlots.count)")
        for slot in header.keySlots {
            var line = "  \(slot.kindName + String(repeating: " ", count: max(0, 12 - slot.kindName.count))) \(slot.fingerprint)"
            if let p = slot.scryptParameters { line += "  scrypt N=2^\(p.logN) r=\(p.r) p=\(p.p)" }
            out.line(line)
        }
        if let reader {
            out.line("files:          \(counts.files)")
            out.line("directories:    \(counts.directories)")
            out.line("symlinks:       \(counts.symlinks)")
            let index = reader.index
            out.line("plaintext:      \(index.totalFileBytes) (\(formatBytes(index.totalFileBytes)))")
            out.line("stored:         \(index.storedFileBytes) (\(formatBytes(index.storedFileBytes))) of file data\(storedRatioText(index))")
            out.line("deduplicated:   \(index.totalFileBytes &- index.distinctFileBytes) (\(formatBytes(index.totalFileBytes &- index.distinctFileBytes))) "
                     + "stored once for several files")
            out.line("created:        \(isoTime(reader.index.creationTime, nanoseconds: nil))")
        } else {
            out.line("(no key given: header fields shown unverified; give a key for contents)")
        }
        return ExitCode.success
    }

    /// `zstd level 3`, `none`.
    private static func compressionText(_ features: BundleFeatures) -> String {
        features.isCompressed ? "\(features.compression.name) level \(features.compressionLevel)" : features.compression.name
    }

    /// `, 23.5 % of the distinct plaintext` (empty without plaintext).
    private static func storedRatioText(_ index: BundleIndex) -> String {
        guard index.distinctFileBytes > 0 else { return "" }
        return ", \(formatFixed(Double(index.storedFileBytes) * 100 / Double(index.distinctFileBytes), digits: 1)) % of the distinct plaintext"
    }

    // MARK: - ls

    private static func list(_ bundle: [UInt8], path: [UInt8], args: ArgumentParser.Result, options: OpenOptions,
                             diagnostics: Diagnostics) throws -> Int32 {
        let reader = try open(bundle, args: args, options: options)
        let index = reader.index
        let start = try resolve(path, in: index)
        let out = OutputStream()
        let long = args.has("-l")
        // --json: the entries are collected and printed as one document at the end.
        var jsonEntries: [JSONValue]? = args.has("--json") ? [] : nil
        var listed = false // set on success: a failure prints no partial document
        // Version 2 bundles get a second size column: the bytes a file's
        // body takes in the bundle (compressed, and shared with other
        // files when deduplicated); version 1 output stays as it was.
        let showsStored = index.features.formatVersion != BundleFormat.version
        var externalShown = 0
        defer {
            if let jsonEntries, listed {
                out.write(JSONValue.object(JSONValue.byteString(path, key: "path") + [("entries", .array(jsonEntries))]).serialized)
            }
            if externalShown > 0 {
                out.flush()
                diagnostics.hint("encfs-mount refuses a bundle with such links unless given \(ReaderOptions.allowExternalSymlinks)")
            }
        }
        // Names and targets are escaped (PrintableText): one line per entry,
        // whatever bytes a name holds.
        func describe(_ entry: IndexEntry, name: [UInt8]) throws {
            if jsonEntries != nil {
                jsonEntries?.append(try entryJSON(entry, name: name, index: index))
            } else {
                try describeAsText(entry, name: name)
            }
            if !options.allowsExternalSymlinks, try index.isExternalSymlink(entry) {
                // Flushed first, so the warning follows its entry on a terminal.
                out.flush()
                let refusal = BundleError.externalSymlink(path: try index.path(of: entry, maximumLength: PrintableText.defaultLimit),
                                                          target: try index.withSymlinkTarget(of: entry) { Array($0) })
                diagnostics.warning(refusal.message, path: refusal.path)
                externalShown += 1
            }
        }
        func describeAsText(_ entry: IndexEntry, name: [UInt8]) throws {
            if long {
                let size = entry.kind == .directory ? 4096 : entry.kind == .symlink ? UInt64(entry.targetLength) : entry.fileSize
                out.write(modeString(entry) + " " + String(size).leftPadded(to: 12) + " ")
                if showsStored { out.write(String(try index.storedSize(of: entry)).leftPadded(to: 12) + " ") }
                out.write(isoTime(entry.mtimeSeconds, nanoseconds: entry.mtimeNanoseconds) + " ")
            }
            out.write(PrintableText.escaping(name))
            if long, entry.kind == .symlink {
                out.write(" -> ")
                out.write(PrintableText.escaping(try index.withSymlinkTarget(of: entry) { Array($0) }))
            }
            out.write([0x0A])
        }

        guard start.kind == .directory else {
            try describe(start, name: path)
            listed = true
            return ExitCode.success
        }
        if args.has("-R") {
            var queue = [start]
            var first = true
            while !queue.isEmpty {
                let dir = queue.removeFirst()
                if jsonEntries == nil {
                    if !first { out.write([0x0A]) }
                    first = false
                    let dirPath = try index.path(of: dir, maximumLength: PrintableText.defaultLimit)
                    out.write(dirPath.isEmpty ? "." : "./" + PrintableText.escaping(dirPath))
                    out.write(Array(":\n".utf8))
                }
                for position in dir.children {
                    let child = try index.entry(at: position)
                    try describe(child, name: index.name(of: child))
                    if child.kind == .directory { queue.append(child) }
                }
            }
        } else {
            for position in start.children {
                let child = try index.entry(at: position)
                try describe(child, name: index.name(of: child))
            }
        }
        listed = true
        return ExitCode.success
    }

    /// Looks `path` up in the index. A failure names the path inside the
    /// bundle, not the bundle file: "no such file or directory
    /// (app.bundle)" would say the bundle is missing.
    private static func resolve(_ path: [UInt8], in index: BundleIndex, followingLast: Bool = false) throws -> IndexEntry {
        do {
            return try index.resolve(path: path, followingLast: followingLast)
        } catch BundleError.notFound {
            throw CommandError("no such file or directory in the bundle", path: path)
        } catch let e as BundleError {
            throw CommandError(e.message, path: path)
        }
    }

    // MARK: - cat

    private static func cat(_ bundle: [UInt8], path: [UInt8], args: ArgumentParser.Result, options: OpenOptions) throws -> Int32 {
        let reader = try open(bundle, args: args, options: options)
        // Symlinks inside the bundle are followed, as a shell would.
        let entry = try resolve(path, in: reader.index, followingLast: true)
        guard entry.kind == .file else { throw CommandError(BundleError.isADirectory.message, path: path) }
        let key = try reader.fileKey(for: entry)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(reader.header.layout.chunkSize) * 16, alignment: 4096)
        defer {
            SecureBytes.wipe(buffer)
            buffer.deallocate()
        }
        let out = OutputStream()
        var offset: UInt64 = 0
        while offset < entry.fileSize {
            let n = try reader.read(entry, key: key, fromOffset: offset, into: buffer)
            guard n > 0 else { break }
            try out.writeDirect(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += UInt64(n)
        }
        return ExitCode.success
    }

    // MARK: - verify

    /// Authenticates every chunk, and checks what readers do not: that file
    /// ids are unique, that no symlink points outside the bundle, and for a
    /// signed bundle that the chunks are the ones signed (opening checked
    /// the signature over the header, the index and the content key).
    private static func verify(_ bundle: [UInt8], args: ArgumentParser.Result, options: OpenOptions,
                               diagnostics: Diagnostics) throws -> Int32 {
        let reader = try open(bundle, args: args, options: options)
        let index = reader.index
        // The chunk digest costs SHA-256 over every chunk: only a signature
        // has one to compare with.
        let display = ProgressDisplay.make(tool: "encfs-inspect", forced: args.has("--progress"), quiet: args.has("--quiet"))
        let report: BundleVerifier.Report
        do {
            defer { display?.finish() }
            report = try BundleVerifier.verify(reader, hashing: reader.header.signatureSlot != nil, progress: display?.progress)
        }
        // Two files with one id share a file key and chunk nonces: the
        // index cannot be what encfs-pack wrote.
        let shared = try index.filesSharingIDs()
        let external = try index.externalSymlinks()
        let damagedChunks = report.damaged.reduce(UInt64(0)) { $0 + UInt64($1.chunks.count) }
        var problems: [String] = []
        if !report.damaged.isEmpty { problems.append("\(damagedChunks) damaged chunks in \(report.damaged.count) files") }
        if !shared.isEmpty { problems.append("\(shared.count) files share a file id") }
        if !external.isEmpty, !options.allowsExternalSymlinks {
            problems.append("\(external.count) symlinks point outside the bundle")
        }
        var signature: (signer: String, matches: Bool)?
        if let matches = try report.matchesSignature(of: reader.header), let signer = try reader.header.signature()?.signerFingerprint {
            signature = (signer, matches)
        }
        let signatureHolds = signature?.matches ?? true
        let out = OutputStream()
        if args.has("--json") {
            var error: String?
            if !problems.isEmpty { error = problems.joined(separator: ", ") }
            if !signatureHolds { error = (error.map { $0 + ", " } ?? "") + "chunk contents differ from what the signature covers" }
            out.write(try verifyJSON(report, shared: shared, external: external, index: index,
                                     signature: signature.map { ($0.signer, $0.matches, !options.origin.signers.isEmpty) },
                                     error: error).serialized)
        } else if !args.has("--quiet") {
            func shown(_ entry: IndexEntry) throws -> String {
                PrintableText.escaping(try index.path(of: entry, maximumLength: PrintableText.defaultLimit))
            }
            for file in report.damaged {
                out.line("damaged: \(try shown(file.entry)) (chunks \(ranges(file.chunks)) of \(file.chunkCount))")
            }
            for (first, duplicate) in shared {
                out.line("damaged: \(try shown(duplicate)) (shares its file id with \(try shown(first)))")
            }
            for link in external {
                out.line("external symlink: \(try shown(link)) -> \(PrintableText.escaping(try index.withSymlinkTarget(of: link) { Array($0) }))")
            }
            var summary = problems.isEmpty ? "intact" : problems.joined(separator: ", ")
            if !external.isEmpty, options.allowsExternalSymlinks {
                summary += " (\(external.count) symlinks point outside the bundle, allowed)"
            }
            out.line("verified \(report.files) files, \(report.chunks) chunks: \(summary)")
            if let signature {
                let checked = options.origin.signers.isEmpty ? " (signer not checked: give --verify-key)" : ""
                out.line(signature.matches ? "signature: every chunk is as signed by \(signature.signer)\(checked)"
                                           : "signature: the chunks are not the ones signed by \(signature.signer)\(checked)")
            }
        }
        out.flush()
        if !external.isEmpty, !options.allowsExternalSymlinks {
            diagnostics.hint("encfs-mount refuses such a bundle unless given \(ReaderOptions.allowExternalSymlinks); "
                             + "so does verify (they are still listed)")
        }
        if !signatureHolds {
            diagnostics.error("chunk contents differ from what the signature covers (re-sealed by a holder of the content key, "
                              + "or damaged)", path: bundle)
        }
        return problems.isEmpty && signatureHolds ? ExitCode.success : ExitCode.failure
    }

    /// `0-3, 7, 9-10`.
    static func ranges(_ sorted: [UInt64]) -> String {
        var parts: [String] = []
        var i = 0
        while i < sorted.count {
            var j = i
            while j + 1 < sorted.count, sorted[j + 1] == sorted[j] + 1 { j += 1 }
            parts.append(i == j ? "\(sorted[i])" : "\(sorted[i])-\(sorted[j])")
            i = j + 1
        }
        return parts.joined(separator: ", ")
    }

    // MARK: - rekey

    private static func rekey(_ bundle: [UInt8], args: ArgumentParser.Result, options: OpenOptions,
                              diagnostics: Diagnostics) throws -> Int32 {
        var changes = BundleRekeyer.Changes()
        if let cost = args.value("--scrypt-log-n") {
            guard let n = UInt8(String(decoding: cost, as: UTF8.self)), (14...20).contains(n) else {
                throw UsageError("--scrypt-log-n must be between 14 and 20")
            }
            changes.scrypt.logN = n
        }
        changes.remove = args.values("--remove").map { String(decoding: $0, as: UTF8.self) }
        for path in args.values("--add-key-file") { changes.addKeys.append(.rawKey(try KeyFiles.readKeyFile(path))) }
        for path in args.values("--add-passphrase-file") {
            changes.addKeys.append(.passphrase(try KeyFiles.readPassphraseFile(path)))
        }
        changes.addRecipients = try args.values("--add-recipient").map { try KeyFiles.readRecipientFile($0) }
        if let path = args.value("--sign-key") { changes.signingKey = try KeyFiles.readSigningKeyFile(path) }
        guard !changes.addKeys.isEmpty || !changes.remove.isEmpty || !changes.addRecipients.isEmpty || changes.signingKey != nil else {
            throw UsageError("rekey needs --add-key-file, --add-passphrase-file, --add-recipient, --remove or --sign-key")
        }
        changes.openedWith = try KeyOptions.gather(from: args, confirm: false)
        // Rekeying rewrites the bundle, it serves nothing: links are kept as
        // they are. With --verify-key / --expect-bundle-id (in `options`),
        // only a bundle of that origin is rekeyed.
        let reader = try BundleReader.open(path: bundle, materials: changes.openedWith, options: showingEverything(options))
        let outcome: BundleRekeyer.Outcome
        let display = ProgressDisplay.make(tool: "encfs-inspect", forced: args.has("--progress"), quiet: args.has("--quiet"))
        changes.progress = display?.progress
        do {
            defer { display?.finish() }
            outcome = try BundleRekeyer.rekey(path: bundle, reader: reader, changes: changes)
        } catch let e as BundleError {
            diagnostics.error(e.message, path: e.path ?? bundle)
            switch e {
            case .slotsNotCarriedOver:
                diagnostics.hint("give each with --add-key-file, --add-passphrase-file or --add-recipient (its .pub file), "
                                 + "or remove it too with --remove FINGERPRINT")
            case .corruptChunk, .corruptIndex:
                diagnostics.hint("the bundle is damaged and was left as it was; encfs-inspect verify lists the damaged files")
            default:
                break
            }
            return ExitCode.failure
        }
        let out = OutputStream()
        if args.has("--json") {
            out.write(rekeyJSON(outcome).serialized)
        } else if args.has("--quiet") {
        } else if outcome.reencrypted {
            out.line("rekeyed: \(outcome.added) slots added, \(outcome.removed) removed, \(outcome.carriedOver) carried over, "
                     + "\(outcome.slots.count) now; re-encrypted under a new content key and bundle id:")
        } else {
            out.line("rekeyed: \(outcome.added) slots added, \(outcome.removed) removed, \(outcome.slots.count) now:")
        }
        if !args.has("--json"), !args.has("--quiet") {
            for slot in outcome.slots { out.line("  \(slot.kindName) \(slot.fingerprint)") }
        }
        switch outcome.signature {
        case .none: break
        case .kept: if !args.has("--json") { out.line("signature kept (it covers the content, which did not change)") }
        case .signed(let fingerprint): if !args.has("--json") { out.line("signed by \(fingerprint)") }
        case .dropped:
            out.flush()
            diagnostics.warning("the bundle signature was dropped: removing a slot re-encrypts under a new content key "
                                + "and bundle id, which it does not cover", path: bundle)
            diagnostics.hint("sign the result with encfs-inspect rekey BUNDLE --sign-key FILE, or give --sign-key with --remove")
        }
        return ExitCode.success
    }

    // MARK: - Formatting

    static func modeString(_ entry: IndexEntry) -> String {
        let type: Character = entry.kind == .directory ? "d" : entry.kind == .symlink ? "l" : "-"
        var s = String(type)
        let m = Int(entry.mode)
        let bits: [(Int, Character)] = [(0o400, "r"), (0o200, "w"), (0o100, "x"), (0o040, "r"), (0o020, "w"), (0o010, "x"),
                                         (0o004, "r"), (0o002, "w"), (0o001, "x")]
        for (i, (bit, char)) in bits.enumerated() {
            var c: Character = m & bit != 0 ? char : "-"
            if i == 2, m & 0o4000 != 0 { c = c == "x" ? "s" : "S" }
            if i == 5, m & 0o2000 != 0 { c = c == "x" ? "s" : "S" }
            if i == 8, m & 0o1000 != 0 { c = c == "x" ? "t" : "T" }
            s.append(c)
        }
        return s
    }

    static func isoTime(_ seconds: Int64, nanoseconds: UInt32?) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ width: Int) -> String { String(v).leftPadded(to: width, with: "0") }
        var s = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        s += " \(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        if let nanoseconds { s += "." + String(nanoseconds).leftPadded(to: 9, with: "0") }
        return s + (nanoseconds == nil ? "Z" : "")
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = " ") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
