import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Changes the key slots of a bundle: adding slots rewrites the header
/// only; removing one re-encrypts everything under a new content key and
/// a new bundle id, so that the removed secret opens nothing of the result.
///
/// - Adding (no removal): the content key and bundle id stay; the new file
///   is the new header followed by a byte-identical copy of the payload.
/// - Removing: a slot that merely disappears would not revoke anything, since
///   the removed holder can unwrap the old content key from any copy of the
///   old file, and with it read the new one or even write its old slot back
///   (the header MAC key derives from the content key). So the payload is
///   re-encrypted, chunk by chunk and then the index, under a fresh content
///   key and bundle id (``PayloadReencryptor``), and every kept slot is made
///   again for the new key from its holder (``RekeyPlan``: the secrets that
///   opened the bundle, and those given to add; a kept slot without one is
///   refused, naming it).
///
/// A signature (``BundleSignature``) covers the content, not the slots:
/// adding slots keeps it as it is. Removing re-encrypts under a new
/// content key and bundle id, which the old signature does not cover, so
/// it is dropped (``Outcome/signature`` says so for the caller to warn),
/// unless a signing key is given: then the new bundle is signed, hashing
/// the new payload as it is written. A signing key given when adding signs
/// the bundle as it is, after every chunk has been read and authenticated.
///
/// Either way the file at `path` (a symlink's target) is replaced atomically
/// by rename, with the old file's mode, owner and group: a failure or crash
/// leaves the old bundle as it was and no temporary file. Copies of the old
/// file made before keep opening with the secrets they had.
package enum BundleRekeyer {
    /// What to change.
    package struct Changes: Sendable {
        /// New raw-key or passphrase slots; when slots are removed, a secret
        /// that opens a kept slot makes that slot again instead.
        package var addKeys: [KeyMaterial] = []
        /// Fingerprints (``KeySlot/fingerprint``) of slots to remove.
        package var remove: [String] = []
        /// scrypt cost for new passphrase slots (re-made ones keep theirs).
        package var scrypt: Scrypt.Parameters = .default
        /// New recipient slots; when slots are removed, a recipient whose
        /// slot is kept makes that slot again instead.
        package var addRecipients: [PublicKey] = []
        /// The secrets the bundle was opened with: when slots are removed,
        /// each kept slot one of them opens is made again from it.
        package var openedWith: [KeyMaterial] = []
        /// Sign the result with this key, replacing any signature.
        package var signingKey: SigningKey?
        /// Advanced as chunks are re-encrypted (after a removal), for a progress display.
        package var progress: WorkProgress?

        package init() {}
    }

    /// What became of the bundle's signature.
    package enum SignatureOutcome: Sendable, Equatable {
        /// The bundle was not signed and is not.
        case none
        /// The old signature still holds and was kept.
        case kept
        /// The old signature no longer held (re-encrypted) and was dropped.
        case dropped
        /// The result was signed by the key with this fingerprint.
        case signed(fingerprint: String)
    }

    /// What changed.
    package struct Outcome: Sendable {
        /// Slots added for new holders.
        package var added: Int
        /// Slots removed.
        package var removed: Int
        /// Kept slots made again for the new content key (0 without removal).
        package var carriedOver: Int
        /// Whether the payload was re-encrypted under a new content key and
        /// bundle id.
        package var reencrypted: Bool
        /// The new header's key slots (the signature slot is not one).
        package var slots: [KeySlot]
        /// What became of the signature.
        package var signature: SignatureOutcome
    }

    /// Rekeys the bundle `reader` has open at `path`.
    ///
    /// - Throws: `BundleError.unknownSlot`, `.lastSlotRemoved` or
    ///   `.removedSlotKeyGiven` (``RekeyPlan``); `.bundleReplaced`;
    ///   `.slotsNotCarriedOver` naming kept slots without a holder;
    ///   `.corruptChunk` or `.corruptIndex` when the bundle is damaged (when
    ///   signing without re-encrypting: the first damaged chunk);
    ///   `.io` on write failures. The old bundle is then untouched.
    package static func rekey(path: [UInt8], reader: BundleReader, changes: Changes) throws -> Outcome {
        let old = reader.header
        let plan = try RekeyPlan.make(header: old, contentKey: reader.keys.contentKey, changes: changes)
        let keys: BundleKeys
        if plan.reencrypts {
            let contentKey: SymmetricKey
            do { contentKey = try SymmetricKey.random() } catch { throw BundleError.crypto("random generator failed") }
            keys = try BundleKeys(contentKey: contentKey, bundleID: try randomBytes(BundleFormat.idSize))
        } else {
            keys = reader.keys
        }
        let slots = try plan.slots(contentKey: keys.contentKey, bundleID: keys.bundleID, scrypt: changes.scrypt)
        // The signature slot, last: a placeholder of its size while the
        // new signature waits for the payload's digests, or the old one
        // when it still holds (same content key and bundle id).
        var signatureOutcome: SignatureOutcome = .none
        var signatureSlot: KeySlot?
        if changes.signingKey != nil {
            signatureSlot = BundleSignature.placeholderSlot
        } else if let old = old.signatureSlot {
            signatureSlot = plan.reencrypts ? nil : old
            signatureOutcome = plan.reencrypts ? .dropped : .kept
        }
        var header = BundleHeader(bundleID: keys.bundleID, layout: old.layout, slots: slots + (signatureSlot.map { [$0] } ?? []),
                                  payloadLength: old.payloadLength, indexOffset: old.indexOffset, indexLength: old.indexLength,
                                  features: old.features)
        guard header.slots.count <= BundleFormat.maximumSlots else {
            throw BundleError.limitExceeded("more than \(BundleFormat.maximumSlots) key slots\(signatureSlot != nil ? " with the signature" : "")")
        }

        // Rewrite the file itself, not a symlink on the way: renaming over
        // the link would turn it into a regular file and leave the bundle it
        // points to (and every other link to it) with the old slots.
        let target = try LocalFiles.resolvedPath(path)
        var st = stat()
        guard target.withCString({ stat($0, &st) }) == 0 else { throw BundleError.lastIO("stat", target) }
        guard FileByteSource.identity(of: st) == reader.source.identity else {
            throw BundleError.bundleReplaced
        }
        let output = try AtomicFile(destination: target, mode: st.st_mode & 0o7777)
        // Keep the owner and group too (a 0640 bundle read by a service's
        // group must stay readable); best effort, since only root may give
        // a file away. Before fchmod: fchown clears set-id bits.
        _ = fchown(output.file.rawValue, st.st_uid, st.st_gid)
        _ = fchmod(output.file.rawValue, st.st_mode & 0o7777)
        // The payload first, the header (which may sign it) last.
        var digests: PayloadReencryptor.Digests?
        if plan.reencrypts {
            digests = try PayloadReencryptor(reader: reader, newKeys: keys, newHeader: header, output: output.file,
                                             hashing: changes.signingKey != nil, progress: changes.progress).run()
        } else {
            try reader.copyPayload(to: output.file, at: UInt64(header.headerLength))
            if changes.signingKey != nil { digests = try digestsForSigning(reader) }
        }
        if let signingKey = changes.signingKey, let digests {
            let signature = try BundleSignature.sign(header: header, indexDigest: digests.index, keys: keys,
                                                     chunkDigest: digests.chunks, with: signingKey)
            header = header.replacingSignature(with: signature.slot)
            signatureOutcome = .signed(fingerprint: signature.signerFingerprint)
        }
        let bytes = try header.serialized(keys: keys)
        try bytes.withUnsafeBytes { try output.file.writeAll($0, toAbsoluteOffset: 0) }
        try output.commit()
        var outcome = Outcome(added: 0, removed: plan.removed, carriedOver: 0, reencrypted: plan.reencrypts, slots: slots,
                              signature: signatureOutcome)
        for step in plan.steps {
            switch step {
            case .keep: break
            case .remake: outcome.carriedOver += 1
            case .add: outcome.added += 1
            }
        }
        return outcome
    }

    /// The digests of the payload as it is, for signing it unchanged:
    /// every chunk is read and authenticated first (a signature vouches
    /// for the content), and the sealed index is hashed as stored (the
    /// reader authenticated it at open).
    ///
    /// - Throws: `BundleError.corruptChunk` naming the first damaged chunk.
    private static func digestsForSigning(_ reader: BundleReader) throws -> PayloadReencryptor.Digests {
        let report = try BundleVerifier.verify(reader)
        if let first = report.damaged.first, let chunk = first.chunks.first {
            throw BundleError.corruptChunk(entry: first.entry.position, chunk: chunk)
        }
        guard let chunkDigest = report.chunkDigest else { preconditionFailure("internal error: verification took no digest") }
        return PayloadReencryptor.Digests(chunks: chunkDigest,
                                          index: try BundleReader.sealedIndexDigest(source: reader.source, header: reader.header))
    }
}
