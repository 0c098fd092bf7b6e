import CryptCore

/// The bundle's signature: who signed it and what, stored as the body of
/// the header's signature slot (kind 5; docs/FORMAT.md has the tables).
///
/// Body, version 1 (164 bytes):
/// ```
///   0   1  version (1)
///   1   1  algorithm (1 = Ed25519)
///   2   2  reserved (0)
///   4  32  signer's public key (raw Ed25519)
///  36  32  key commitment: HKDF-SHA256(content key, salt = bundle id,
///          info "encfs v1 key commitment"), 32 bytes
///  68  32  chunk digest: SHA-256 over the sealed chunks (ciphertext ‖ tag)
///          of every file, file entries in index order
/// 100  64  Ed25519 signature of the message below
/// ```
/// Signed message (155 bytes): "encfs v1 signature" (18) ‖ bundle id (16) ‖
/// chunk size log2 (1) ‖ payload length (u64 LE) ‖ index offset (u64 LE) ‖
/// index length (u64 LE) ‖ SHA-256 of the sealed index, ciphertext ‖ tag
/// (32) ‖ key commitment (32) ‖ chunk digest (32).
///
/// Why these fields: the key commitment pins the content key (a slot
/// holder cannot put another key under the signature: that would need a
/// preimage of the commitment), and with it the header MAC and index keys;
/// the sealed index's hash pins the index. The chunk digest covers whole
/// sealed chunks, not only their tags: whoever knows a file key can change
/// a GCM ciphertext and keep its tag (GHASH is linear in the ciphertext
/// once its key is known), so a digest of tags alone would not notice a
/// re-sealed chunk. The other key slots are not signed, so adding a slot
/// keeps a signature valid.
package struct BundleSignature: Sendable, Equatable {
    /// The body version this build writes and checks.
    static let version: UInt8 = 1
    /// Algorithm byte of Ed25519 (the only one of version 1).
    static let algorithmEd25519: UInt8 = 1
    /// Body bytes of version 1.
    static let bodySize = 164
    /// Bytes of the signed message.
    static let messageSize = 155

    /// The signer's raw Ed25519 public key (32 bytes).
    package let signerKey: [UInt8]
    /// HKDF of the content key the signer packed with (32 bytes).
    package let keyCommitment: [UInt8]
    /// SHA-256 of every sealed chunk, in index order (32 bytes).
    package let chunkDigest: [UInt8]
    /// The Ed25519 signature (64 bytes).
    let signature: [UInt8]

    init(signerKey: [UInt8], keyCommitment: [UInt8], chunkDigest: [UInt8], signature: [UInt8]) {
        self.signerKey = signerKey
        self.keyCommitment = keyCommitment
        self.chunkDigest = chunkDigest
        self.signature = signature
    }

    /// Parses a version 1 signature slot.
    ///
    /// - Parameter position: the slot's position in the header, for messages.
    /// - Throws: `BundleError.corruptHeader` for a wrong length, algorithm
    ///   or reserved bytes; `.unsupportedSignature` for another version.
    init(slot: KeySlot, position: Int) throws {
        let body = slot.body
        guard slot.kind == .signature, let version = body.first else {
            throw BundleError.corruptHeader("key slot \(position) (signature) is empty")
        }
        guard version == Self.version else { throw BundleError.unsupportedSignature(version: version) }
        guard body.count == Self.bodySize else {
            throw BundleError.corruptHeader("key slot \(position) (signature) has \(body.count) bytes, expected \(Self.bodySize)")
        }
        guard body[1] == Self.algorithmEd25519 else {
            throw BundleError.corruptHeader("key slot \(position) (signature) names unknown algorithm \(body[1])")
        }
        guard body[2] == 0, body[3] == 0 else {
            throw BundleError.corruptHeader("key slot \(position) (signature) has non-zero reserved bytes")
        }
        self.init(signerKey: Array(body[4..<36]), keyCommitment: Array(body[36..<68]), chunkDigest: Array(body[68..<100]),
                  signature: Array(body[100..<164]))
    }

    /// The signature as a header slot.
    var slot: KeySlot {
        KeySlot(kindCode: KeySlot.Kind.signature.rawValue,
                body: [Self.version, Self.algorithmEd25519, 0, 0] + signerKey + keyCommitment + chunkDigest + signature)
    }

    /// A slot of the right size holding no signature: the writer reserves
    /// the header's length with it before the signature can be made.
    static let placeholderSlot = KeySlot(kindCode: KeySlot.Kind.signature.rawValue,
                                         body: [UInt8](repeating: 0, count: bodySize))

    /// The signer's fingerprint: the first 8 bytes of SHA-256 over the raw
    /// public key, as 16 hex digits.
    package var signerFingerprint: String { Self.fingerprint(ofRawKey: signerKey) }

    /// The fingerprint of a signing public key (see ``signerFingerprint``).
    package static func fingerprint(of key: SigningPublicKey) -> String {
        fingerprint(ofRawKey: key.rawRepresentation)
    }

    private static func fingerprint(ofRawKey raw: [UInt8]) -> String {
        Hex.encode(raw.withUnsafeBytes { SHA256.hash($0) }.prefix(8))
    }

    /// The message a signature covers (155 bytes).
    ///
    /// - Parameters:
    ///   - header: gives the bundle id, chunk size and payload geometry.
    ///   - indexDigest: SHA-256 of the sealed index (ciphertext ‖ tag).
    static func message(header: BundleHeader, indexDigest: [UInt8], keyCommitment: [UInt8], chunkDigest: [UInt8]) -> [UInt8] {
        var message = BundleFormat.signatureContext
        message.reserveCapacity(messageSize)
        message += header.bundleID
        message.append(header.layout.chunkSizeLog2)
        message.appendLE(header.payloadLength)
        message.appendLE(header.indexOffset)
        message.appendLE(header.indexLength)
        message += indexDigest
        message += keyCommitment
        message += chunkDigest
        precondition(message.count == messageSize, "internal error: signed message of \(message.count) bytes")
        return message
    }

    /// Signs a bundle.
    ///
    /// - Parameters:
    ///   - header: the bundle's header (its slots do not matter).
    ///   - indexDigest: SHA-256 of the sealed index.
    ///   - keys: the bundle's keys, for the key commitment.
    ///   - chunkDigest: SHA-256 of the sealed chunks in index order.
    ///   - signingKey: the signer.
    /// - Throws: `BundleError.crypto` when signing fails.
    static func sign(header: BundleHeader, indexDigest: [UInt8], keys: BundleKeys, chunkDigest: [UInt8],
                     with signingKey: SigningKey) throws -> BundleSignature {
        let commitment = keys.keyCommitment
        let message = Self.message(header: header, indexDigest: indexDigest, keyCommitment: commitment, chunkDigest: chunkDigest)
        do {
            let signature = try message.withUnsafeBytes { try signingKey.signature(for: $0) }
            return BundleSignature(signerKey: signingKey.publicKey.rawRepresentation, keyCommitment: commitment,
                                   chunkDigest: chunkDigest, signature: signature)
        } catch {
            throw BundleError.crypto("signing failed: \(error)")
        }
    }

    /// Whether the stored signature is the signer's over `header`'s fields,
    /// `indexDigest` and the stored commitment and chunk digest. Says
    /// nothing about whether the content key matches the commitment or the
    /// chunks the digest: callers check those against what they computed.
    func isValid(for header: BundleHeader, indexDigest: [UInt8]) -> Bool {
        // A signer key OpenSSL refuses (not a point, small order) verifies nothing.
        guard let key = try? signerKey.withUnsafeBytes({ try SigningPublicKey(rawRepresentation: $0) }) else { return false }
        let message = Self.message(header: header, indexDigest: indexDigest, keyCommitment: keyCommitment, chunkDigest: chunkDigest)
        return signature.withUnsafeBytes { s in message.withUnsafeBytes { key.isValidSignature(s, for: $0) } }
    }
}
