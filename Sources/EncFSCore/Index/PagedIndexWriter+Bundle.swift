import CryptCore

extension PagedIndexWriter {
    /// What writing a paged index gives the packer: the bundle's final
    /// header (without its MAC) and the signer, when signed.
    struct Written {
        let header: BundleHeader
        let signerFingerprint: String?
    }

    /// Pages, seals and (when `signingKey` is given) signs the index, and
    /// appends it to the payload after the chunk data.
    ///
    /// - Parameters:
    ///   - flat: the index plaintext `IndexBuilder.serialize` made.
    ///   - features: what the chunks use; the header gets version 2 and
    ///     page 0's length added.
    ///   - indexOffset: where the index starts in the payload (the chunk
    ///     data's length).
    ///   - chunkDigest: the signature's chunk digest (when signing).
    /// - Throws: `BundleError.crypto`, `.limitExceeded`, what the sink throws.
    static func write(flat: [UInt8], layout: ChunkLayout, features: BundleFeatures, keys: BundleKeys, slots: [KeySlot],
                      indexOffset: UInt64, chunkDigest: [UInt8]?, signingKey: SigningKey?, into sink: ChunkSink) throws -> Written {
        var built = try build(flat: flat, layout: layout, fragmentLayout: features.fragmentLayout(files: layout))
        defer { built.wipe() }
        let indexLength = built.sealedLength
        var header = BundleHeader(bundleID: keys.bundleID, layout: layout, slots: slots, payloadLength: indexOffset + indexLength,
                                  indexOffset: indexOffset, indexLength: indexLength,
                                  features: features.withPagedIndex(headLength: built.headSealedLength))
        let sealed = try built.seal(keys: keys, associatedData: IndexBuilder.associatedData(header))
        var fingerprint: String?
        if let signingKey, let chunkDigest {
            let signature = try BundleSignature.sign(header: header, indexDigest: sealed.withUnsafeBytes { SHA256.hash($0) }, keys: keys,
                                                     chunkDigest: chunkDigest, with: signingKey)
            header = header.replacingSignature(with: signature.slot)
            fingerprint = signature.signerFingerprint
        }
        try sink.append(sealed)
        return Written(header: header, signerFingerprint: fingerprint)
    }
}
