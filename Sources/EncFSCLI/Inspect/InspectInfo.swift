import EncFSCore

/// `encfs-inspect info BUNDLE [--json]`: the header (format version,
/// bundle id, chunk size, key slots, size, signer), and with a key the
/// counts, sizes and creation time. Never prompts: without a key it shows
/// the header only, unverified.
struct InspectInfo: InspectSubcommand {
    static let operandCount = 1...1

    let bundle: InspectedBundle
    let json: Bool

    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) {
        self.bundle = bundle
        json = args.has("--json")
    }

    func run(diagnostics: Diagnostics) throws -> Int32 {
        let options = bundle.options
        let materials = try KeyOptions.gather(from: bundle.args, confirm: false, optional: true)
        let header: BundleHeader
        let size: UInt64
        var reader: BundleReader?
        if materials.isEmpty {
            let source = try bundle.source()
            (header, size) = try BundleReader.readHeader(source: source)
            _ = try options.origin.checkWithoutKey(header: header, source: source)
        } else {
            let opened = try BundleReader.open(source: try bundle.source(), materials: materials,
                                               options: bundle.optionsShowingEverything)
            reader = opened
            header = opened.header
            size = opened.bundleSize
        }
        let signature = SignatureStatus(header: header, verified: options.origin.signers.isEmpty ? nil : reader != nil)
        let counts = try reader.map { try Self.counts(in: $0.index) } ?? EntryCounts()
        let out = OutputStream()
        if json {
            out.write(InspectCommand.infoJSON(header: header, size: size, reader: reader, signature: signature, counts: counts).serialized)
            return ExitCode.success
        }
        Self.writeHeader(header, size: size, signature: signature, to: out)
        if let reader {
            Self.writeContents(reader.index, counts: counts, to: out)
        } else {
            out.line("(no key given: header fields shown unverified; give a key for contents)")
        }
        return ExitCode.success
    }

    /// Files, directories (the root not counted) and symlinks.
    /// Entries by kind, and the files stored as fragment slices.
    struct EntryCounts {
        var files = 0
        var directories = 0
        var symlinks = 0
        /// Files that are slices of fragments.
        var fragmentFiles = 0
        /// Distinct fragments they lie in.
        var fragments = 0
    }

    static func counts(in index: BundleIndex) throws -> EntryCounts {
        var counts = EntryCounts()
        var descriptors = Set<UInt32>()
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            switch entry.kind {
            case .file:
                counts.files += 1
                if let descriptor = entry.fragmentDescriptor {
                    counts.fragmentFiles += 1
                    descriptors.insert(descriptor)
                }
            case .directory: counts.directories += 1
            case .symlink: counts.symlinks += 1
            }
        }
        counts.directories -= 1 // the root
        counts.fragments = descriptors.count
        return counts
    }

    /// What anyone can read: the header's fields and key slots.
    private static func writeHeader(_ header: BundleHeader, size: UInt64, signature: SignatureStatus, to out: OutputStream) {
        out.line("format version: \(header.features.formatVersion)")
        out.line("compression:    \(compressionText(header.features))")
        out.line("bundle id:      \(Hex.encode(header.bundleID))")
        out.line("chunk size:     \(header.layout.chunkSize) (\(formatBytes(header.layout.chunkSize)))")
        if header.features.hasFragments {
            let unit = header.fragmentLayout.chunkSize
            out.line("fragment unit:  \(unit) (\(formatBytes(unit)))")
        }
        out.line("bundle size:    \(size) (\(formatBytes(size)))")
        out.line("signature:      \(signature.text)")
        out.line("key slots:      \(header.keySlots.count)")
        for slot in header.keySlots {
            var line = "  \(slot.kindName + String(repeating: " ", count: max(0, 12 - slot.kindName.count))) \(slot.fingerprint)"
            if let p = slot.scryptParameters { line += "  scrypt N=2^\(p.logN) r=\(p.r) p=\(p.p)" }
            out.line(line)
        }
    }

    /// What a key shows: the counts, the sizes, the creation time.
    private static func writeContents(_ index: BundleIndex, counts: EntryCounts, to out: OutputStream) {
        out.line("files:          \(counts.files)")
        out.line("directories:    \(counts.directories)")
        out.line("symlinks:       \(counts.symlinks)")
        out.line("plaintext:      \(index.totalFileBytes) (\(formatBytes(index.totalFileBytes)))")
        out.line("stored:         \(index.storedFileBytes) (\(formatBytes(index.storedFileBytes))) of file data\(storedRatioText(index))")
        out.line("deduplicated:   \(index.totalFileBytes &- index.distinctFileBytes) (\(formatBytes(index.totalFileBytes &- index.distinctFileBytes))) "
                 + "stored once for several files")
        if index.features.hasFragments {
            out.line("fragments:      \(counts.fragments), holding \(counts.fragmentFiles) small files")
        }
        out.line("created:        \(RFC3339.format(seconds: index.creationTime, separator: .space))")
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
}
