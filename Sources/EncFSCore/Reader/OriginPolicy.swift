import CryptCore

/// What a reader requires of a bundle's origin before it uses anything in
/// it: a signature by one of ``signers``, and/or the bundle id ``bundleID``.
/// Empty (the default), any bundle a given secret opens is accepted.
///
/// Why it exists: a recipient slot is made from a public key alone, so
/// anyone who has the host's public key can pack a bundle the host's
/// identity opens; without a signature, opening proves only that the
/// bundle was made for the key, not by whom (docs/SECURITY.md).
///
/// The checks run in the order that spends least on a bundle that will be
/// refused: the unauthenticated header first (no signature, another signer,
/// another id: refused before any key is tried, so no scrypt work), then
/// the content key against the signed key commitment once a slot opened,
/// then the Ed25519 signature once the sealed index has been read and
/// hashed (in the same pass that checks its GCM tag). Nothing from the
/// index is used before that last check passes.
package struct OriginPolicy: Sendable, Equatable {
    /// Keys one of which must have signed the bundle; empty: no signature
    /// required.
    package var signers: [SigningPublicKey]
    /// The bundle id (16 bytes) the bundle must have, or nil for any.
    package var bundleID: [UInt8]?

    /// - Parameters:
    ///   - signers: keys one of which must have signed the bundle.
    ///   - bundleID: the bundle id the bundle must have.
    package init(signers: [SigningPublicKey] = [], bundleID: [UInt8]? = nil) {
        self.signers = signers
        self.bundleID = bundleID
    }

    /// Whether opening must hash the sealed index for a signature check.
    var requiresSignature: Bool { !signers.isEmpty }

    /// The checks the header allows before any key is tried.
    ///
    /// - Returns: the signature to check later, when one is required.
    /// - Throws: `BundleError.unexpectedBundleID`, `.notSigned`,
    ///   `.unsupportedSignature`, `.untrustedSigner`.
    func checkHeader(_ header: BundleHeader) throws -> BundleSignature? {
        if let bundleID, bundleID != header.bundleID {
            throw BundleError.unexpectedBundleID(expected: bundleID, actual: header.bundleID)
        }
        guard requiresSignature else { return nil }
        guard let signature = try header.signature() else { throw BundleError.notSigned }
        guard signers.contains(where: { $0.rawRepresentation == signature.signerKey }) else {
            throw BundleError.untrustedSigner(fingerprint: signature.signerFingerprint)
        }
        return signature
    }

    /// Checks that the content key a slot gave is the one signed.
    ///
    /// The header MAC is no help here: whoever holds a slot knows the
    /// content key and can make a header (and a MAC) for another key.
    ///
    /// - Throws: `BundleError.badSignature`.
    func checkKeys(_ keys: BundleKeys, against signature: BundleSignature?) throws {
        guard let signature else { return }
        let matches = keys.keyCommitment.withUnsafeBytes { a in
            signature.keyCommitment.withUnsafeBytes { b in ConstantTime.equal(a, b) }
        }
        guard matches else { throw BundleError.badSignature("the content key is not the one signed") }
    }

    /// Checks the Ed25519 signature over the header's fields and the hash
    /// of the sealed index.
    ///
    /// - Parameter indexDigest: SHA-256 of the sealed index as read.
    /// - Throws: `BundleError.badSignature`.
    func checkSignature(_ signature: BundleSignature?, header: BundleHeader, indexDigest: [UInt8]) throws {
        guard let signature else { return }
        guard signature.isValid(for: header, indexDigest: indexDigest) else {
            throw BundleError.badSignature("the header or the index is not what was signed")
        }
    }
}

extension OriginPolicy {
    /// Checks everything but the content key, without a key: the bundle id,
    /// the signer, and the signature over the header's fields and the
    /// sealed index as stored (read and hashed here). For tools that show
    /// a bundle without opening it; whether the content key is the one
    /// signed needs a key, and opening checks it.
    ///
    /// - Parameters:
    ///   - header: the bundle's unauthenticated header.
    ///   - source: the bundle's bytes.
    /// - Returns: the signature checked, or nil when none is required.
    /// - Throws: as opening does for the same checks; `.lengthMismatch`.
    package func checkWithoutKey(header: BundleHeader, source: any ByteSource) throws -> BundleSignature? {
        guard let signature = try checkHeader(header) else { return nil }
        try checkSignature(signature, header: header, indexDigest: BundleReader.sealedIndexDigest(source: source, header: header))
        return signature
    }
}
