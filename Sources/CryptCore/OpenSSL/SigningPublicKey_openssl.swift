internal import COpenSSL

/// An Ed25519 public key (RFC 8032), for checking bundle signatures.
///
/// Holds the 32-byte key and an `EVP_PKEY` made from it once, so a check
/// does not build the key again. Two values are equal when their 32 bytes
/// are (public data: compared plainly, not in constant time).
///
/// Keys that would accept forged signatures are refused when the value is
/// made: the eight small-order points and their non-canonical encodings.
/// With one of them (the identity point `01 00 … 00`, say) OpenSSL 3.0
/// accepts `R = B, S = 1` as a signature of any message, so a hostile or
/// corrupted configuration could otherwise disable the check silently. Any
/// other non-canonical encoding (y ≥ p) is refused too, as RFC 8032
/// section 5.1.3 requires, and so is a 32-byte string that is no curve
/// point at all (OpenSSL would take it and then verify nothing with it).
package struct SigningPublicKey: Sendable, Equatable {
    /// The size of a raw public key in bytes.
    package static let byteCount = 32

    /// The 32-byte key as RFC 8032 encodes it (what `openssl pkey -pubout
    /// -outform DER` ends with).
    package let rawRepresentation: [UInt8]

    /// The key as SubjectPublicKeyInfo PEM text (`-----BEGIN PUBLIC KEY-----`),
    /// byte for byte what `openssl pkey -pubout` writes.
    package let pemRepresentation: [UInt8]

    /// The `EVP_PKEY` made from ``rawRepresentation``.
    private let key: OwnedPublicKey

    /// Wraps a raw 32-byte Ed25519 public key. The corresponding C function
    /// is `EVP_PKEY_new_raw_public_key_ex`.
    ///
    /// - Throws: `CryptError.invalidKeySize` unless `raw` is 32 bytes;
    ///   `.invalidKey("Ed25519 public key is a small-order point")`,
    ///   `.invalidKey("Ed25519 public key is not canonically encoded")` or
    ///   `.invalidKey("Ed25519 public key is not a point on the curve")`.
    package init(rawRepresentation raw: UnsafeRawBufferPointer) throws(CryptError) {
        try self.init(validating: [UInt8](raw))
    }

    /// Checks `raw` (see ``init(rawRepresentation:)``) and makes the key.
    private init(validating raw: [UInt8]) throws(CryptError) {
        guard raw.count == Self.byteCount else { throw .invalidKeySize(raw.count) }
        if Self.isSmallOrder(raw) { throw .invalidKey("Ed25519 public key is a small-order point") }
        if !Self.isCanonical(raw) { throw .invalidKey("Ed25519 public key is not canonically encoded") }
        if !Ed25519Point.isOnCurve(raw) { throw .invalidKey("Ed25519 public key is not a point on the curve") }
        guard let pkey = EVP_PKEY_new_raw_public_key_ex(nil, "ED25519", nil, raw, raw.count) else {
            throw openSSLError("EVP_PKEY_new_raw_public_key_ex")
        }
        key = OwnedPublicKey(taking: pkey) // frees it from here on
        rawRepresentation = raw
        pemRepresentation = try KeyPEMWriter.publicKey(pkey)
    }

    /// Reads a SubjectPublicKeyInfo public key from PEM text
    /// (`-----BEGIN PUBLIC KEY-----`, as `openssl pkey -pubout` writes it).
    /// Whitespace around the block is ignored. The corresponding C function
    /// is `PEM_read_bio_PUBKEY_ex`.
    ///
    /// - Throws: `CryptError.invalidKey` with the reason: `malformed PEM`,
    ///   `expected a public key but found a private key`,
    ///   `expected an Ed25519 key, not X25519` (or `RSA`, `EC`, …), and the
    ///   refusals of ``init(rawRepresentation:)``.
    package init(pemRepresentation pem: UnsafeRawBufferPointer) throws(CryptError) {
        let pkey = try PEMKeyReader.readPublicKey(pem)
        defer { EVP_PKEY_free(pkey) }
        try SigningKeyChecks.requireEd25519(pkey)
        try self.init(validating: Self.rawPublicKey(of: pkey))
    }

    /// The public half of an Ed25519 private key, copied out as its raw 32
    /// bytes so no private material is shared.
    init(publicHalfOf privateKey: OpaquePointer) throws(CryptError) {
        try self.init(validating: Self.rawPublicKey(of: privateKey))
    }

    /// Whether `signature` is a valid Ed25519 signature of `message` by this
    /// key (RFC 8032 section 5.1.7, with S < L required). The corresponding
    /// C function is `EVP_DigestVerify`.
    ///
    /// Never throws and never traps: a signature of the wrong length, a
    /// modified message or signature, a signature by another key, and any
    /// failure inside OpenSSL all give false. OpenSSL's error queue is left
    /// as it was.
    package func isValidSignature(_ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == SigningKey.signatureByteCount, let signatureBase = signature.baseAddress else {
            return false
        }
        return OpenSSLErrorQueue.discardingNewErrors { () -> Bool in
            guard let ctx = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestVerifyInit_ex(ctx, nil, nil, nil, nil, key.pkey, nil) == 1 else { return false }
            var empty: UInt8 = 0 // a valid pointer for an empty message
            let result = withUnsafeMutablePointer(to: &empty) { dummy in
                EVP_DigestVerify(ctx, signatureBase.assumingMemoryBound(to: UInt8.self), signature.count,
                                 message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(dummy),
                                 message.count)
            }
            return result == 1 // 0: does not verify; below 0: error
        }
    }

    /// Compares the 32 raw bytes (public data: not in constant time).
    package static func == (lhs: SigningPublicKey, rhs: SigningPublicKey) -> Bool {
        lhs.rawRepresentation == rhs.rawRepresentation
    }

    // MARK: - Key checks

    /// The y-coordinates of the eight points of order 1, 2, 4 and 8 on
    /// edwards25519, little-endian with the sign bit clear: 0 (order 4),
    /// 1 (order 1), the two order-8 values, p − 1 (order 2), and the
    /// non-canonical p and p + 1 (0 and 1 again). Each comes with either
    /// sign bit. The same list as libsodium's `ge25519_has_small_order`;
    /// Tests/CryptCoreTests/Vectors/ed25519-small-order.json holds every
    /// encoding with the derivation.
    private static let smallOrderY: [[UInt8]] = [
        [UInt8](repeating: 0, count: 32),
        [1] + [UInt8](repeating: 0, count: 31),
        [0x26, 0xE8, 0x95, 0x8F, 0xC2, 0xB2, 0x27, 0xB0, 0x45, 0xC3, 0xF4, 0x89, 0xF2, 0xEF, 0x98, 0xF0,
         0xD5, 0xDF, 0xAC, 0x05, 0xD3, 0xC6, 0x33, 0x39, 0xB1, 0x38, 0x02, 0x88, 0x6D, 0x53, 0xFC, 0x05],
        [0xC7, 0x17, 0x6A, 0x70, 0x3D, 0x4D, 0xD8, 0x4F, 0xBA, 0x3C, 0x0B, 0x76, 0x0D, 0x10, 0x67, 0x0F,
         0x2A, 0x20, 0x53, 0xFA, 0x2C, 0x39, 0xCC, 0xC6, 0x4E, 0xC7, 0xFD, 0x77, 0x92, 0xAC, 0x03, 0x7A],
        [0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
        [0xED] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
        [0xEE] + [UInt8](repeating: 0xFF, count: 30) + [0x7F],
    ]

    /// True when `raw` (32 bytes) encodes a point of order 1, 2, 4 or 8.
    private static func isSmallOrder(_ raw: [UInt8]) -> Bool {
        smallOrderY.contains { y in
            (0..<32).allSatisfy { i in (i == 31 ? raw[i] & 0x7F : raw[i]) == y[i] }
        }
    }

    /// False when the y-coordinate in `raw` (32 bytes, little-endian, sign
    /// bit masked) is p = 2^255 − 19 or more.
    private static func isCanonical(_ raw: [UInt8]) -> Bool {
        // y ≥ p only when bytes 31…1 are 7F FF … FF and byte 0 is ED or more.
        guard raw[31] & 0x7F == 0x7F, raw[1..<31].allSatisfy({ $0 == 0xFF }) else { return true }
        return raw[0] < 0xED
    }

    /// The raw 32-byte public key of an Ed25519 `EVP_PKEY`. The
    /// corresponding C function is `EVP_PKEY_get_raw_public_key`.
    private static func rawPublicKey(of pkey: OpaquePointer) throws(CryptError) -> [UInt8] {
        var raw = [UInt8](repeating: 0, count: byteCount)
        var length = raw.count
        guard EVP_PKEY_get_raw_public_key(pkey, &raw, &length) == 1, length == byteCount else {
            throw openSSLError("EVP_PKEY_get_raw_public_key")
        }
        return raw
    }
}

/// One `EVP_PKEY` holding only public material, freed in `deinit`.
///
/// Sendable: immutable after `init`, and every operation on it makes its own
/// context.
private final class OwnedPublicKey: @unchecked Sendable {
    let pkey: OpaquePointer

    /// Takes ownership of `pkey`.
    init(taking pkey: OpaquePointer) {
        self.pkey = pkey
    }

    deinit {
        EVP_PKEY_free(pkey)
    }
}
