import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Changes the key slots of a bundle without re-encrypting anything.
///
/// The content key stays the same, so only the header changes; because the
/// header's length changes with its slots, the new bundle is written as the
/// new header followed by a byte-identical copy of the payload, then
/// renamed over the old file, with the old file's mode, owner and group.
/// Atomic: a failure or crash leaves the old bundle as it was.
///
/// Limit: removing a slot stops that secret from opening *this file*; a copy
/// of the old file still opens with it, and it shares the content key.
/// Re-pack to revoke a secret for good.
public enum BundleRekeyer {
    /// What to change.
    public struct Changes: Sendable {
        /// New raw-key or passphrase slots.
        public var addKeys: [KeyMaterial] = []
        /// Fingerprints (``KeySlot/fingerprint``) of slots to remove.
        public var remove: [String] = []
        /// scrypt cost for new passphrase slots.
        public var scrypt: Scrypt.Parameters = .default
        /// New recipient slots.
        public var addRecipients: [PublicKey] = []

        public init() {}
    }

    /// What changed.
    public struct Outcome: Sendable {
        public var added: Int
        public var removed: Int
        public var slots: [KeySlot]
    }

    /// Rewrites the header of the bundle `reader` has open at `path`.
    ///
    /// - Throws: `BundleError.rejected` when a fingerprint matches no
    ///   slot or the last slot would go; `.io` on write failures (the old
    ///   bundle is then untouched).
    public static func rekey(path: [UInt8], reader: BundleReader, changes: Changes) throws -> Outcome {
        let header = reader.header
        let contentKey = reader.keys.contentKey
        var slots = header.slots
        var removed = 0
        for fingerprint in changes.remove {
            let wanted = fingerprint.lowercased()
            let before = slots.count
            slots.removeAll { $0.fingerprint == wanted }
            guard slots.count < before else {
                throw BundleError.rejected("no key slot has fingerprint \(fingerprint)")
            }
            removed += before - slots.count
        }
        // Before any scrypt run: readers refuse more passphrase work than this.
        try KeySlot.checkTotalScryptWork(slots.compactMap(\.scryptWork) + changes.addKeys.compactMap {
            if case .passphrase = $0 { KeySlot.work(of: changes.scrypt) } else { nil }
        })
        var added = 0
        for material in changes.addKeys {
            slots.append(try KeySlot.make(for: material, wrapping: contentKey, bundleID: header.bundleID, scrypt: changes.scrypt))
            added += 1
        }
        for recipient in changes.addRecipients {
            slots.append(try KeySlot.recipient(wrapping: contentKey, to: recipient, bundleID: header.bundleID))
            added += 1
        }
        guard !slots.isEmpty else { throw BundleError.rejected("refusing to remove the last key slot") }
        guard slots.count <= BundleFormat.maximumSlots else {
            throw BundleError.limitExceeded("more than \(BundleFormat.maximumSlots) key slots")
        }
        let newHeader = BundleHeader(bundleID: header.bundleID, layout: header.layout, slots: slots,
                                     payloadLength: header.payloadLength, indexOffset: header.indexOffset,
                                     indexLength: header.indexLength)
        let bytes = try newHeader.serialized(keys: reader.keys)

        // Rewrite the file itself, not a symlink on the way: renaming over
        // the link would turn it into a regular file and leave the bundle it
        // points to (and every other link to it) with the old slots.
        let target = try FileIO.resolvedPath(path)
        var st = stat()
        guard target.withCString({ stat($0, &st) }) == 0 else { throw BundleError.lastIO("stat", target) }
        guard FileByteSource.identity(of: st) == reader.source.identity else {
            throw BundleError.rejected("the bundle file was replaced while it was being rekeyed")
        }
        let output = try AtomicFile(destination: target, mode: st.st_mode & 0o7777)
        // Keep the owner and group too (a 0640 bundle read by a service's
        // group must stay readable); best effort, since only root may give
        // a file away. Before fchmod: fchown clears set-id bits.
        _ = fchown(output.file.rawValue, st.st_uid, st.st_gid)
        _ = fchmod(output.file.rawValue, st.st_mode & 0o7777)
        try bytes.withUnsafeBytes { try output.file.writeAll($0) }
        try reader.copyPayload(to: output.file, at: UInt64(bytes.count))
        try output.commit()
        return Outcome(added: added, removed: removed, slots: slots)
    }
}
