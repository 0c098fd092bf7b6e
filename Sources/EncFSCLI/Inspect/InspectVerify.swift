import EncFSCore

/// `encfs-inspect verify BUNDLE [--json] [--progress] [--quiet]`:
/// authenticates every chunk, and checks what readers do not: that file
/// ids are unique, that no symlink points outside the bundle, and for a
/// signed bundle that the chunks are the ones signed (opening checked the
/// signature over the header, the index and the content key). Exit 1 when
/// any of it fails.
struct InspectVerify: InspectSubcommand {
    static let operandCount = 1...1

    let bundle: InspectedBundle
    let json: Bool
    let quiet: Bool
    let forcesProgress: Bool

    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) {
        self.bundle = bundle
        json = args.has("--json")
        quiet = args.has("--quiet")
        forcesProgress = args.has("--progress")
    }

    /// What was found, and what of it makes the exit code 1.
    private struct Findings {
        var report: BundleVerifier.Report
        /// Two files with one id share a file key and chunk nonces: the
        /// index cannot be what encfs-pack wrote.
        var shared: [(first: IndexEntry, duplicate: IndexEntry)]
        var external: [IndexEntry]
        /// The signer, and whether the chunks are the ones it signed.
        var signature: (signer: String, matches: Bool)?
        /// One phrase per kind of damage; external symlinks only when not allowed.
        var problems: [String]
        var signatureHolds: Bool { signature?.matches ?? true }
    }

    func run(diagnostics: Diagnostics) throws -> Int32 {
        let options = bundle.options
        let reader = try bundle.open()
        let findings = try verify(reader, diagnostics: diagnostics)
        let out = OutputStream()
        if json {
            out.write(try jsonDocument(findings, index: reader.index).serialized)
        } else if !quiet {
            try writeReport(findings, index: reader.index, to: out)
        }
        out.flush()
        if !findings.external.isEmpty, !options.allowsExternalSymlinks {
            diagnostics.hint("encfs-mount refuses such a bundle unless given \(ReaderOptions.allowExternalSymlinks); "
                             + "so does verify (they are still listed)")
        }
        if !findings.signatureHolds {
            diagnostics.error("chunk contents differ from what the signature covers (re-sealed by a holder of the content key, "
                              + "or damaged)", path: bundle.path)
        }
        return findings.problems.isEmpty && findings.signatureHolds ? ExitCode.success : ExitCode.failure
    }

    private func verify(_ reader: BundleReader, diagnostics: Diagnostics) throws -> Findings {
        let index = reader.index
        // The chunk digest costs SHA-256 over every chunk: only a signature
        // has one to compare with.
        let display = ProgressDisplay.make(tool: diagnostics.tool, forced: forcesProgress, quiet: quiet)
        let report: BundleVerifier.Report
        do {
            defer { display?.finish() }
            report = try BundleVerifier.verify(reader, hashing: reader.header.signatureSlot != nil, progress: display?.progress)
        }
        let shared = try index.filesSharingIDs()
        let external = try index.externalSymlinks()
        let damagedChunks = report.damaged.reduce(UInt64(0)) { $0 + UInt64($1.chunks.count) }
        var problems: [String] = []
        if !report.damaged.isEmpty { problems.append("\(damagedChunks) damaged chunks in \(report.damaged.count) files") }
        if !shared.isEmpty { problems.append("\(shared.count) files share a file id") }
        if !external.isEmpty, !bundle.options.allowsExternalSymlinks {
            problems.append("\(external.count) symlinks point outside the bundle")
        }
        var signature: (signer: String, matches: Bool)?
        if let matches = try report.matchesSignature(of: reader.header), let signer = try reader.header.signature()?.signerFingerprint {
            signature = (signer, matches)
        }
        return Findings(report: report, shared: shared, external: external, signature: signature, problems: problems)
    }

    /// `--json`: the document, with `error` saying what made the exit code 1.
    private func jsonDocument(_ findings: Findings, index: BundleIndex) throws -> JSONValue {
        var error: String?
        if !findings.problems.isEmpty { error = findings.problems.joined(separator: ", ") }
        if !findings.signatureHolds { error = (error.map { $0 + ", " } ?? "") + "chunk contents differ from what the signature covers" }
        let signerChecked = !bundle.options.origin.signers.isEmpty
        return try InspectCommand.verifyJSON(findings.report, shared: findings.shared, external: findings.external, index: index,
                                             signature: findings.signature.map { ($0.signer, $0.matches, signerChecked) },
                                             error: error)
    }

    /// The text report: a line per damaged file, shared id and external
    /// symlink, the summary, and the signature check.
    private func writeReport(_ findings: Findings, index: BundleIndex, to out: OutputStream) throws {
        let options = bundle.options
        func shown(_ entry: IndexEntry) throws -> String {
            PrintableText.escaping(try index.path(of: entry, maximumLength: PrintableText.defaultLimit))
        }
        for file in findings.report.damaged {
            out.line("damaged: \(try shown(file.entry)) (chunks \(Self.ranges(file.chunks)) of \(file.chunkCount))")
        }
        for (first, duplicate) in findings.shared {
            out.line("damaged: \(try shown(duplicate)) (shares its file id with \(try shown(first)))")
        }
        for link in findings.external {
            out.line("external symlink: \(try shown(link)) -> \(PrintableText.escaping(try index.withSymlinkTarget(of: link) { Array($0) }))")
        }
        var summary = findings.problems.isEmpty ? "intact" : findings.problems.joined(separator: ", ")
        if !findings.external.isEmpty, options.allowsExternalSymlinks {
            summary += " (\(findings.external.count) symlinks point outside the bundle, allowed)"
        }
        out.line("verified \(findings.report.files) files, \(findings.report.chunks) chunks: \(summary)")
        if let signature = findings.signature {
            let checked = options.origin.signers.isEmpty ? " (signer not checked: give --verify-key)" : ""
            out.line(signature.matches ? "signature: every chunk is as signed by \(signature.signer)\(checked)"
                                       : "signature: the chunks are not the ones signed by \(signature.signer)\(checked)")
        }
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
}
