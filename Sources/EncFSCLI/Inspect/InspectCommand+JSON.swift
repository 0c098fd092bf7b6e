import EncFSCore

/// What `encfs-inspect info|ls|verify|rekey --json` print: one document
/// each, keys in snake_case (the schema is in encfs-inspect(1)).
extension InspectCommand {
    /// `info --json`: the header fields, and with a key the counts.
    static func infoJSON(header: BundleHeader, size: UInt64, reader: BundleReader?, signature: SignatureStatus,
                         counts: InspectInfo.EntryCounts) -> JSONValue {
        var fields: [(key: String, value: JSONValue)] = [
            ("format_version", .number(header.features.formatVersion)),
            ("compression", .string(header.features.compression.name)),
            ("compression_level", .number(header.features.compressionLevel)),
            ("bundle_id", .string(Hex.encode(header.bundleID))),
            ("chunk_size", .number(header.layout.chunkSize)),
            // Null for a bundle without fragments.
            ("fragment_unit", header.features.hasFragments ? .number(header.fragmentLayout.chunkSize) : .null),
            ("bundle_size", .number(size)),
            ("verified", .bool(reader != nil)),
            ("slots", .array(header.keySlots.map(slotJSON))),
            ("signature", signature.json),
        ]
        if let reader {
            fields += [
                ("files", .number(counts.files)), ("directories", .number(counts.directories)),
                ("symlinks", .number(counts.symlinks)),
                ("plaintext_bytes", .number(reader.index.totalFileBytes)),
                ("stored_bytes", .number(reader.index.storedFileBytes)),
                ("deduplicated_bytes", .number(reader.index.totalFileBytes &- reader.index.distinctFileBytes)),
                ("fragments", .number(counts.fragments)), ("fragment_files", .number(counts.fragmentFiles)),
                ("created", .string(RFC3339.format(seconds: reader.index.creationTime))),
            ]
        }
        return .object(fields)
    }

    /// One key slot: its kind and fingerprint (and scrypt cost for a passphrase).
    static func slotJSON(_ slot: KeySlot) -> JSONValue {
        var fields: [(key: String, value: JSONValue)] = [("kind", .string(slot.kindName)), ("fingerprint", .string(slot.fingerprint))]
        if let p = slot.scryptParameters {
            fields.append(("scrypt", .object([("log_n", .number(p.logN)), ("r", .number(p.r)), ("p", .number(p.p))])))
        }
        return .object(fields)
    }

    /// One entry of `ls --json`: its path below the bundle root, its name,
    /// type, mode bits, size, mtime, for a file the bytes its body takes in
    /// the bundle (`stored_size`: compressed, and shared with other files
    /// when deduplicated), and for a symlink its target and whether it
    /// points outside the bundle.
    static func entryJSON(_ entry: IndexEntry, name: [UInt8], index: BundleIndex) throws -> JSONValue {
        let type = entry.kind == .directory ? "directory" : entry.kind == .symlink ? "symlink" : "file"
        var fields = JSONValue.byteString(try index.path(of: entry, maximumLength: Int.max), key: "path")
        fields += JSONValue.byteString(name, key: "name")
        fields += [
            ("type", .string(type)), ("mode", .number(entry.mode & 0o7777)),
            ("size", .number(entry.fileSize)),
            ("mtime", .string(RFC3339.format(seconds: entry.mtimeSeconds, nanoseconds: entry.mtimeNanoseconds))),
            ("mtime_seconds", .number(entry.mtimeSeconds)), ("mtime_nanoseconds", .number(entry.mtimeNanoseconds)),
        ]
        if entry.kind == .file { fields.append(("stored_size", .number(try index.storedSize(of: entry)))) }
        // A slice's stored size is its share of its fragment, by size.
        if entry.isFragmentSlice { fields.append(("in_fragment", .bool(true))) }
        if entry.kind == .symlink {
            fields += JSONValue.byteString(try index.withSymlinkTarget(of: entry) { Array($0) }, key: "target")
            fields.append(("external", .bool(try index.isExternalSymlink(entry))))
        }
        return .object(fields)
    }

    /// `verify --json`: the counts, each damaged file with its damaged
    /// chunks, files sharing an id, external symlinks, the signature
    /// check, `intact`, and `error` (what made the exit code 1) when not.
    static func verifyJSON(_ report: BundleVerifier.Report, shared: [(first: IndexEntry, duplicate: IndexEntry)],
                           external: [IndexEntry], index: BundleIndex,
                           signature: (signer: String, matches: Bool, signerChecked: Bool)?, error: String?) throws -> JSONValue {
        func path(_ entry: IndexEntry, key: String = "path") throws -> [(key: String, value: JSONValue)] {
            JSONValue.byteString(try index.path(of: entry, maximumLength: Int.max), key: key)
        }
        var fields: [(key: String, value: JSONValue)] = [
            ("files", .number(report.files)), ("chunks", .number(report.chunks)), ("intact", .bool(error == nil)),
            ("damaged", .array(try report.damaged.map { file in
                .object(try path(file.entry) + [("chunks", .array(file.chunks.map { .number($0) })),
                                                 ("chunk_count", .number(file.chunkCount))])
            })),
            ("shared_file_ids", .array(try shared.map { .object(try path($0.duplicate) + path($0.first, key: "shares_with")) })),
            ("external_symlinks", .array(try external.map { link in
                .object(try path(link) + JSONValue.byteString(try index.withSymlinkTarget(of: link) { Array($0) }, key: "target"))
            })),
            ("signature", signature.map { .object([("signer", .string($0.signer)), ("matches", .bool($0.matches)),
                                                   ("signer_checked", .bool($0.signerChecked))]) } ?? .null),
        ]
        if let error { fields.append(("error", .string(error))) }
        return .object(fields)
    }

    /// `rekey --json`: what changed, the slots now, and the signature.
    static func rekeyJSON(_ outcome: BundleRekeyer.Outcome) -> JSONValue {
        let signature: JSONValue
        switch outcome.signature {
        case .none: signature = .null
        case .kept: signature = .object([("status", "kept")])
        case .signed(let fingerprint): signature = .object([("status", "signed"), ("signer", .string(fingerprint))])
        case .dropped: signature = .object([("status", "dropped")])
        }
        return .object([
            ("added", .number(outcome.added)), ("removed", .number(outcome.removed)),
            ("carried_over", .number(outcome.carriedOver)), ("reencrypted", .bool(outcome.reencrypted)),
            ("slots", .array(outcome.slots.map(slotJSON))), ("signature", signature),
        ])
    }
}
