import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-pack SRC_DIR BUNDLE [options]`.
package enum PackCommand {
    static let help = """
    usage: encfs-pack SRC_DIR BUNDLE [--recipient PUBFILE]... [key options] [--sign-key FILE] [--compress METHOD] [--chunk-size SIZE] [--fragment-size SIZE] [--fragment-unit SIZE] [--exclude GLOB]... [--strict] [--quiet] [--progress] [--json]

    Encrypts the directory SRC_DIR into the bundle file BUNDLE (AES-256-GCM in
    chunks). BUNDLE appears only when complete; on failure nothing is left and
    an existing BUNDLE is unchanged. Plaintext is never written to disk.

    key options (each one gets its own key slot; any mix, repeatable):
      --recipient PUBFILE      a public key (PEM, X25519 from encfs-keygen or
                               openssl, or RSA ≥ 2048 bits): packing to
                               recipients only needs no secret at all
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key; its public half becomes a recipient
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY (hex key) and ENCFS_PASSPHRASE, used when no key
      option is given; with none of these and a terminal, a passphrase is
      asked for twice without echo.

    signing:
      --sign-key FILE          sign the bundle with this Ed25519 private key
                               (encfs-keygen --sign, or openssl genpkey
                               -algorithm ed25519); hosts then refuse a
                               bundle not signed by it with --verify-key.
                               Without a signature anyone who has a
                               recipient's public key can make a bundle that
                               the recipient opens

    options:
      --compress METHOD        none (default: a format version 1 bundle) or
                               zstd[:LEVEL] (LEVEL 1 … 19, default 9): each
                               chunk is compressed on its own before it is
                               sealed (format version 2; a chunk's stored
                               length shows how well it compressed: see
                               docs/SECURITY.md). Files with identical
                               contents are always stored once
      --chunk-size SIZE        4K … 1M, a power of two (default 4K, or 64K
                               with --compress zstd)
      --fragment-size SIZE     with --compress: files smaller than SIZE are
                               packed together into shared chunks
                               (fragments; 0 … the chunk size, default the
                               chunk size, or half of it when the fragment
                               unit is the chunk size; 0: none)
      --fragment-unit SIZE     with --compress: fragments are filled to SIZE
                               and each compressed as one unit (4K … 1M, a
                               power of two; default 256K; the chunk size or
                               less: one chunk). Larger units compress small
                               files better; reading one small file inflates
                               its whole unit
      --exclude GLOB           leave out matching entries (repeatable); a GLOB
                               with '/' matches the path below SRC_DIR, else the
                               name; an excluded directory drops its subtree
      --scrypt-log-n N         passphrase KDF cost, N = 2^n (14 … 20, default 17)
      --strict                 refuse symlinks that point outside the bundle
                               (absolute, or climbing above SRC_DIR): exit 1,
                               nothing written. Without it each is stored
                               with a warning, and encfs-mount refuses the
                               bundle unless given --allow-external-symlinks
      -q, --quiet              errors only: no summary line, no progress, no
                               warnings (--strict turns the symlink warning
                               into an error)
      --progress               draw progress on stderr even when it is not a
                               terminal (by default only on a terminal)
      --json                   the summary as one JSON document on stdout
                               (schema: encfs-pack(1)); even with --quiet
      -h, --help               this text
      --version                print the version and exit
      --                       end of options

    exit codes: 0 success, 1 runtime failure, 2 usage error
    """

    static let parser = ArgumentParser(options: [
        .init(["--recipient"], takesValue: true),
        .init(["--sign-key"], takesValue: true),
        .init(["--chunk-size"], takesValue: true),
        .init(["--fragment-size"], takesValue: true),
        .init(["--fragment-unit"], takesValue: true),
        .init(["--compress"], takesValue: true),
        .init(["--exclude"], takesValue: true),
        .init(["--scrypt-log-n"], takesValue: true),
        .init(["--strict"], takesValue: false),
        .init(["--quiet", "-q"], takesValue: false),
        .init(["--json"], takesValue: false),
        .init(["--progress"], takesValue: false),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ] + KeyOptions.parserOptions)

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-pack")
        let args: ArgumentParser.Result
        var options: PackOptions
        do {
            args = try parser.parse(arguments)
            if args.has("--help") {
                print(help)
                return ExitCode.success
            }
            if VersionOption.handle(args, tool: "encfs-pack") { return ExitCode.success }
            options = try packOptions(from: args)
        } catch {
            diagnostics.report(error)
            diagnostics.hint("see encfs-pack --help")
            return ExitCode.usage
        }
        let source = args.positionals[0]
        let destination = args.positionals[1]
        do {
            options.recipients = try args.values("--recipient").map { try KeyFiles.readRecipientFile($0) }
            if let path = args.value("--sign-key") { options.signingKey = try KeyFiles.readSigningKeyFile(path) }
            // With recipients, no secret is needed: never prompt then.
            options.keys = try KeyOptions.gather(from: args, confirm: true, optional: !options.recipients.isEmpty)
        } catch {
            diagnostics.report(error)
            return ExitCode.code(for: error)
        }
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        let display = ProgressDisplay.make(tool: "encfs-pack", forced: args.has("--progress"), quiet: args.has("--quiet"))
        options.progress = display?.progress
        do {
            let summary: PackSummary
            do {
                defer { display?.finish() }
                let quiet = args.has("--quiet")
                summary = try BundleWriter.pack(source: source, destination: destination, options: options) { message, path in
                    if quiet { return }
                    guard let display else { return diagnostics.warning(message, path: path) }
                    display.interrupting { diagnostics.warning(message, path: path) }
                }
            }
            var end = timespec()
            clock_gettime(CLOCK_MONOTONIC, &end)
            let seconds = Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
            if args.has("--json") {
                let out = PackCommand.summaryJSON(summary, destination: destination, seconds: seconds).serialized
                out.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
            } else if !args.has("--quiet") {
                let out = Array("encfs-pack: \(summaryLine(summary, seconds: seconds)) -> \(PrintableText.escaping(destination))\n".utf8)
                out.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
            }
            if summary.externalSymlinks > 0 {
                diagnostics.hint("encfs-mount refuses this bundle unless given --allow-external-symlinks; "
                                 + "--strict refuses to write such a bundle")
            }
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: destination)
            if case BundleError.externalSymlink = error {
                diagnostics.hint("refused by --strict; without it the link is stored with a warning")
            }
            return ExitCode.failure
        }
    }

    /// The packing settings in `args` (without the keys, read after).
    ///
    /// - Throws: `UsageError` for a missing operand or a value out of range.
    private static func packOptions(from args: ArgumentParser.Result) throws -> PackOptions {
        var options = PackOptions()
        guard args.positionals.count == 2 else {
            throw UsageError(args.positionals.count < 2 ? "missing SRC_DIR or BUNDLE" : "too many arguments")
        }
        if let method = args.value("--compress") {
            (options.compression, options.compressionLevel) = try parseCompression(method)
            if options.compression != .none { options.chunkSizeLog2 = BundleFormat.defaultCompressedChunkSizeLog2 }
        }
        if let size = args.value("--chunk-size") { options.chunkSizeLog2 = try parseChunkSize(size) }
        if let size = args.value("--fragment-size") { options.fragmentThreshold = try parseFragmentSize(size) }
        if let size = args.value("--fragment-unit") { options.fragmentUnitLog2 = try parseChunkSize(size, what: "fragment unit") }
        if let cost = args.value("--scrypt-log-n") {
            guard let n = UInt8(String(decoding: cost, as: UTF8.self)), (14...20).contains(n) else {
                throw UsageError("--scrypt-log-n must be between 14 and 20")
            }
            options.scrypt.logN = n
        }
        options.excludes = args.values("--exclude")
        options.refusesExternalSymlinks = args.has("--strict")
        return options
    }

    /// The summary after packing, without `--json`: what went in, what
    /// came out, in how long.
    private static func summaryLine(_ summary: PackSummary, seconds: Double) -> String {
        var line = "packed \(summary.files) files, \(summary.directories) directories, \(summary.symlinks) symlinks"
        line += " (\(formatBytes(summary.plaintextBytes))) into \(formatBytes(summary.bundleBytes))"
        line += " in \(formatSeconds(seconds))"
        if summary.sharedFiles > 0 {
            line += ", \(summary.sharedFiles) duplicate files stored once (\(formatBytes(summary.sharedBytes)) saved)"
        }
        if summary.fragments > 0 { line += ", \(summary.fragmentFiles) small files in \(summary.fragments) fragments" }
        if summary.skipped > 0 { line += ", \(summary.skipped) skipped" }
        if summary.excluded > 0 { line += ", \(summary.excluded) excluded" }
        if let signer = summary.signerFingerprint { line += ", signed by \(signer)" }
        return line
    }

    /// Parses `none`, `zstd` or `zstd:LEVEL` (1 … 19).
    static func parseCompression(_ text: [UInt8]) throws -> (CompressionMethod, Int) {
        let s = String(decoding: text, as: UTF8.self)
        if s == "none" { return (.none, CompressionMethod.defaultZstdLevel) }
        if s == "zstd" { return (.zstd, CompressionMethod.defaultZstdLevel) }
        if s.hasPrefix("zstd:") {
            guard let level = Int(s.dropFirst(5)), CompressionMethod.zstdLevels.contains(level) else {
                throw UsageError("invalid zstd level in --compress \(PrintableText.escaping(text)) (use 1 … 19)")
            }
            return (.zstd, level)
        }
        throw UsageError("unknown compression \(PrintableText.escaping(text)) (use none or zstd[:LEVEL])")
    }

    /// Parses a fragment threshold: a byte count, or `16K`-style (at
    /// most 1M; the packer caps it at the chunk size).
    static func parseFragmentSize(_ text: [UInt8]) throws -> Int {
        var s = String(decoding: text, as: UTF8.self).uppercased()
        var multiplier = 1
        if s.hasSuffix("K") { multiplier = 1024; s.removeLast() } else if s.hasSuffix("M") { multiplier = 1 << 20; s.removeLast() }
        guard let n = Int(s), n >= 0, n <= (1 << 20) / multiplier else {
            throw UsageError("invalid fragment size \(PrintableText.escaping(text)) (use 0 … 1M)")
        }
        return n * multiplier
    }

    /// Parses `4K`, `64K`, `1M` or a byte count into log2.
    ///
    /// - Parameter what: names the value in messages.
    static func parseChunkSize(_ text: [UInt8], what: String = "chunk size") throws -> UInt8 {
        var s = String(decoding: text, as: UTF8.self).uppercased()
        var multiplier: UInt64 = 1
        if s.hasSuffix("K") { multiplier = 1024; s.removeLast() } else if s.hasSuffix("M") { multiplier = 1 << 20; s.removeLast() }
        guard let n = UInt64(s), n > 0, n <= (1 << 20) / multiplier || multiplier == 1, n.multipliedReportingOverflow(by: multiplier).overflow == false else {
            throw UsageError("invalid \(what) \(String(decoding: text, as: UTF8.self)) (use 4K … 1M, a power of two)")
        }
        let bytes = n * multiplier
        guard bytes.nonzeroBitCount == 1 else {
            throw UsageError("\(what) \(String(decoding: text, as: UTF8.self)) is not a power of two")
        }
        let log2 = UInt8(bytes.trailingZeroBitCount)
        guard BundleFormat.chunkSizeLog2Range.contains(log2) else {
            throw UsageError("\(what) \(String(decoding: text, as: UTF8.self)) is outside 4K … 1M")
        }
        return log2
    }
}

/// `1.5 GiB`, `12.0 KiB`, `17 B`.
func formatBytes(_ n: UInt64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(n) B" : "\(formatFixed(value, digits: 1)) \(units[unit])"
}

func formatSeconds(_ s: Double) -> String { "\(formatFixed(s, digits: 2)) s" }

func formatFixed(_ value: Double, digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (value * scale).rounded()
    let whole = Int(scaled / scale)
    let frac = Int(scaled) - whole * Int(scale)
    let fracText = String(frac)
    return digits == 0 ? "\(whole)" : "\(whole).\(String(repeating: "0", count: max(0, digits - fracText.count)))\(fracText)"
}
