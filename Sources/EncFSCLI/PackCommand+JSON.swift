import EncFSCore

extension PackCommand {
    /// `encfs-pack --json`: the summary line's figures as one document.
    static func summaryJSON(_ summary: PackSummary, destination: [UInt8], seconds: Double) -> JSONValue {
        .object(JSONValue.byteString(destination, key: "bundle") + [
            ("files", .number(summary.files)), ("directories", .number(summary.directories)),
            ("symlinks", .number(summary.symlinks)), ("skipped", .number(summary.skipped)),
            ("excluded", .number(summary.excluded)), ("external_symlinks", .number(summary.externalSymlinks)),
            ("plaintext_bytes", .number(summary.plaintextBytes)), ("bundle_bytes", .number(summary.bundleBytes)),
            ("format_version", .number(summary.formatVersion)), ("deduplicated_files", .number(summary.sharedFiles)),
            ("deduplicated_bytes", .number(summary.sharedBytes)),
            ("fragment_files", .number(summary.fragmentFiles)), ("fragments", .number(summary.fragments)),
            ("milliseconds", .number(Int64((seconds * 1000).rounded()))),
            ("signer", summary.signerFingerprint.map { .string($0) } ?? .null),
        ])
    }
}
