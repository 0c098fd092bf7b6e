internal import COpenSSL

/// A private key: X25519 for key agreement, or RSA (2048 to 16384 bits) for
/// OAEP decryption.
///
/// Owns one `EVP_PKEY`, freed in `deinit` (OpenSSL wipes X25519 and RSA
/// private key material when it frees it). The private material lives in
/// OpenSSL's secure memory, which is CryptCore's locked ``SecureHeap``: it
/// is set up before any key is generated or read. Sendable because the key never
/// changes after `init`, and OpenSSL 3 allows one `EVP_PKEY` to be used from
/// several threads at once as long as each operation has its own
/// `EVP_PKEY_CTX`, which every method here creates and frees.
///
/// Unlike ``AESGCM``, each operation fetches its algorithm implicitly (there
/// is no OpenSSL 3.0 API to pass a fetched `EVP_KEYEXCH` or
/// `EVP_ASYM_CIPHER` to a context). That costs a lock per call, which is fine
/// for key slots (a few operations per mount), not for per-chunk work.
package final class PrivateKey: @unchecked Sendable {
    /// The owned `EVP_PKEY`.
    let pkey: OpaquePointer

    /// The algorithm and size of the key.
    package let kind: AsymmetricKeyKind

    /// The public half, a separate `EVP_PKEY` without the private part.
    package let publicKey: PublicKey

    /// Takes a reference to `pkey` (the caller keeps and frees its own).
    ///
    /// `kind` must come from ``AsymmetricKeyChecks/kind(of:)`` on the same key.
    private init(retaining pkey: OpaquePointer, kind: AsymmetricKeyKind) throws {
        let publicKey = try PublicKey(publicHalfOf: pkey, kind: kind)
        guard EVP_PKEY_up_ref(pkey) == 1 else { throw openSSLError("EVP_PKEY_up_ref") }
        self.pkey = pkey
        self.kind = kind
        self.publicKey = publicKey
    }

    deinit {
        EVP_PKEY_free(pkey)
    }

    /// A fresh X25519 key from the system random generator. The
    /// corresponding C function is `EVP_PKEY_generate`.
    ///
    /// - Throws: `CryptError.openSSL` when generation fails.
    package static func generateX25519() throws -> PrivateKey {
        let pkey = try generatedKey(algorithm: "X25519")
        defer { EVP_PKEY_free(pkey) }
        return try PrivateKey(retaining: pkey, kind: .x25519)
    }

    /// Reads an unencrypted private key from PEM text: PKCS#8
    /// (`-----BEGIN PRIVATE KEY-----`) or traditional RSA
    /// (`-----BEGIN RSA PRIVATE KEY-----`). Whitespace around the block is
    /// ignored. The corresponding C function is `PEM_read_bio_PrivateKey_ex`,
    /// given a passphrase callback that refuses, so OpenSSL never prompts.
    ///
    /// - Parameter pem: the PEM text; only read, never copied by CryptCore.
    /// - Throws: `CryptError.invalidKey` with the reason: `malformed PEM`,
    ///   `expected a private key but found a public key`,
    ///   `encrypted private keys are not supported`, `unsupported key type …`,
    ///   `RSA key has … bits; at least 2048 are required`, ….
    package convenience init(pem: UnsafeRawBufferPointer) throws {
        SecureHeap.prepare() // so OpenSSL puts the private key there
        let pkey = try PEMKeyReader.readPrivateKey(pem)
        defer { EVP_PKEY_free(pkey) }
        let kind = try AsymmetricKeyChecks.kind(of: pkey)
        try AsymmetricKeyChecks.validatePublicHalf(of: pkey, kind: kind)
        try AsymmetricKeyChecks.validatePair(of: pkey, kind: kind)
        try self.init(retaining: pkey, kind: kind)
    }

    /// The key as unencrypted PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`),
    /// readable by `openssl pkey -in`. The corresponding C function is
    /// `PEM_write_bio_PKCS8PrivateKey`.
    ///
    /// Written through a secure-heap memory BIO, whose buffer OpenSSL wipes
    /// when it frees it; the result lives in wiping storage.
    ///
    /// - Throws: `CryptError.openSSL` when encoding fails.
    package func pemPKCS8() throws -> SecureBytes {
        try KeyPEMWriter.privateKeyPKCS8(pkey)
    }

    /// The X25519 shared secret with a peer's raw 32-byte public key.
    ///
    /// - Parameter peerRaw: the peer's public key, 32 bytes (RFC 7748 u-coordinate).
    /// - Returns: 32 bytes in wiping storage. Feed them to a KDF (``HKDF``);
    ///   never use them as a key directly.
    /// - Throws: `CryptError.invalidKeySize` when `peerRaw` is not 32 bytes;
    ///   `.invalidKey` when this is not an X25519 key or the peer is a
    ///   low-order point (the shared secret would be all zero).
    package func x25519SharedSecret(withPeer peerRaw: UnsafeRawBufferPointer) throws -> SecureBytes {
        try requireX25519()
        return try x25519SharedSecret(with: PublicKey(x25519Raw: peerRaw))
    }

    /// The X25519 shared secret with a peer's public key. The corresponding C
    /// function is `EVP_PKEY_derive`.
    ///
    /// RFC 7748 section 6.1 asks implementations to check for an all-zero
    /// result, which a low-order peer point gives whatever the private key.
    /// OpenSSL refuses that result itself; it is checked again here so the
    /// rule does not depend on the library version.
    ///
    /// - Returns: 32 bytes in wiping storage.
    /// - Throws: `CryptError.invalidKey` when either key is not X25519 or the
    ///   peer is a low-order point; `.openSSL` for other OpenSSL failures.
    package func x25519SharedSecret(with peer: PublicKey) throws -> SecureBytes {
        try requireX25519()
        guard peer.kind == .x25519 else { throw CryptError.invalidKey("the peer key is not an X25519 key") }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw openSSLError("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1 else { throw openSSLError("EVP_PKEY_derive_init") }
        guard EVP_PKEY_derive_set_peer(ctx, peer.pkey) == 1 else { throw openSSLError("EVP_PKEY_derive_set_peer") }
        let lowOrder = CryptError.invalidKey("the X25519 peer key is a low-order point (all-zero shared secret)")
        return try SecureBytes(count: AsymmetricKeyKind.x25519ByteCount) { (out: UnsafeMutableRawBufferPointer) throws in
            var length = out.count
            // OpenSSL's X25519 derivation fails exactly when the result is
            // all zero (ossl_x25519 returns 0); the key and peer are known good.
            guard EVP_PKEY_derive(ctx, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) == 1 else {
                ERR_clear_error()
                throw lowOrder
            }
            guard length == AsymmetricKeyKind.x25519ByteCount else { throw openSSLError("EVP_PKEY_derive") }
            var accumulated: UInt8 = 0 // no early exit: constant time
            for byte in out { accumulated |= byte }
            guard accumulated != 0 else { throw lowOrder }
        }
    }

    /// Decrypts an RSA-OAEP ciphertext (SHA-256 for both the OAEP digest and
    /// MGF1). The corresponding C function is `EVP_PKEY_decrypt`.
    ///
    /// - Parameters:
    ///   - ciphertext: exactly as many bytes as the modulus.
    ///   - label: the OAEP label given when encrypting (often empty).
    /// - Returns: the plaintext in wiping storage.
    /// - Throws: `CryptError.authenticationFailure` for any decryption
    ///   failure (wrong key, wrong label, modified ciphertext: OAEP does not
    ///   say which, and neither does this); `.invalidBufferSize` for a
    ///   ciphertext of the wrong length; `.invalidKey` for an X25519 key.
    package func rsaOAEPDecrypt(_ ciphertext: UnsafeRawBufferPointer, label: [UInt8]) throws -> SecureBytes {
        guard case .rsa(let bits) = kind else { throw CryptError.invalidKey("RSA-OAEP needs an RSA key, not an X25519 key") }
        let modulusBytes = (bits + 7) / 8
        guard ciphertext.count == modulusBytes, let input = ciphertext.baseAddress else {
            throw CryptError.invalidBufferSize(what: "RSA-OAEP ciphertext", expected: modulusBytes, actual: ciphertext.count)
        }
        return try RSAOAEP.withContext(pkey, label: label, encrypting: false) { ctx throws -> SecureBytes in
            // OpenSSL wants room for a whole modulus; the plaintext is shorter.
            var plaintextCount = 0
            let padded = try SecureBytes(count: modulusBytes) { (out: UnsafeMutableRawBufferPointer) throws in
                var length = out.count
                guard EVP_PKEY_decrypt(ctx, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length,
                                       input.assumingMemoryBound(to: UInt8.self), ciphertext.count) == 1,
                      length <= out.count else {
                    ERR_clear_error()
                    throw CryptError.authenticationFailure
                }
                plaintextCount = length
            }
            return padded.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<plaintextCount])) }
        }
    }

    private func requireX25519() throws {
        guard kind == .x25519 else { throw CryptError.invalidKey("X25519 key agreement needs an X25519 key, not an RSA key") }
    }
}

/// A public key: X25519 or RSA (2048 to 16384 bits).
///
/// Owns one `EVP_PKEY` holding only public material, freed in `deinit`.
/// Sendable for the same reason as ``PrivateKey``: immutable after `init`,
/// and every operation uses its own `EVP_PKEY_CTX`.
package final class PublicKey: @unchecked Sendable {
    /// The owned `EVP_PKEY`.
    let pkey: OpaquePointer

    /// The algorithm and size of the key.
    package let kind: AsymmetricKeyKind

    /// The raw 32-byte X25519 public key (RFC 7748 u-coordinate); nil for RSA.
    package let x25519Raw: [UInt8]?

    /// The RSA modulus size in bytes, which is also the size of an OAEP
    /// ciphertext; nil for X25519.
    package var rsaModulusBytes: Int? {
        if case .rsa(let bits) = kind { return (bits + 7) / 8 }
        return nil
    }

    /// Takes a reference to `pkey` (the caller keeps and frees its own).
    private init(retaining pkey: OpaquePointer, kind: AsymmetricKeyKind) throws {
        let raw = kind == .x25519 ? try Self.rawX25519(of: pkey) : nil
        guard EVP_PKEY_up_ref(pkey) == 1 else { throw openSSLError("EVP_PKEY_up_ref") }
        self.pkey = pkey
        self.kind = kind
        self.x25519Raw = raw
    }

    deinit {
        EVP_PKEY_free(pkey)
    }

    /// Reads a SubjectPublicKeyInfo public key from PEM text
    /// (`-----BEGIN PUBLIC KEY-----`, as written by `openssl pkey -pubout`).
    /// Whitespace around the block is ignored. The corresponding C function
    /// is `PEM_read_bio_PUBKEY_ex`.
    ///
    /// RSA keys are also checked with `EVP_PKEY_public_check` (odd modulus
    /// without small factors, odd exponent above 1): a key from a file is
    /// untrusted, and an exponent of 1 would publish the plaintext.
    ///
    /// - Throws: `CryptError.invalidKey` with the reason: `malformed PEM`,
    ///   `expected a public key but found a private key`,
    ///   `unsupported key type …`, `RSA key has … bits; at least 2048 are required`, ….
    package convenience init(pem: UnsafeRawBufferPointer) throws {
        let pkey = try PEMKeyReader.readPublicKey(pem)
        defer { EVP_PKEY_free(pkey) }
        let kind = try AsymmetricKeyChecks.kind(of: pkey)
        try AsymmetricKeyChecks.validatePublicHalf(of: pkey, kind: kind)
        try self.init(retaining: pkey, kind: kind)
    }

    /// Wraps a raw 32-byte X25519 public key. Every 32-byte string is a valid
    /// X25519 input (the top bit is ignored, RFC 7748 section 5); low-order
    /// points are refused later, by the key agreement. The corresponding C
    /// function is `EVP_PKEY_new_raw_public_key_ex`.
    ///
    /// - Throws: `CryptError.invalidKeySize` unless `x25519Raw` is 32 bytes.
    package convenience init(x25519Raw: UnsafeRawBufferPointer) throws {
        guard x25519Raw.count == AsymmetricKeyKind.x25519ByteCount, let raw = x25519Raw.baseAddress else {
            throw CryptError.invalidKeySize(x25519Raw.count)
        }
        guard let pkey = EVP_PKEY_new_raw_public_key_ex(nil, "X25519", nil, raw.assumingMemoryBound(to: UInt8.self),
                                                        x25519Raw.count) else {
            throw openSSLError("EVP_PKEY_new_raw_public_key_ex")
        }
        defer { EVP_PKEY_free(pkey) }
        try self.init(retaining: pkey, kind: .x25519)
    }

    /// The public half of a private key, copied through its
    /// SubjectPublicKeyInfo DER so no private material is shared.
    convenience init(publicHalfOf privateKey: OpaquePointer, kind: AsymmetricKeyKind) throws {
        let der = try Self.subjectPublicKeyInfoDER(of: privateKey)
        let decoded: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY_ex(nil, &cursor, buffer.count, nil, nil)
        }
        guard let pkey = decoded else { throw openSSLError("d2i_PUBKEY_ex") }
        defer { EVP_PKEY_free(pkey) }
        try self.init(retaining: pkey, kind: kind)
    }

    /// The DER encoding of the SubjectPublicKeyInfo (RFC 5280): what
    /// `openssl pkey -pubout -outform DER` writes. The corresponding C
    /// function is `i2d_PUBKEY`.
    ///
    /// - Throws: `CryptError.openSSL` when encoding fails.
    package func subjectPublicKeyInfoDER() throws -> [UInt8] {
        try Self.subjectPublicKeyInfoDER(of: pkey)
    }

    /// The key as PEM text (`-----BEGIN PUBLIC KEY-----`), byte for byte
    /// what `openssl pkey -pubout` writes. The corresponding C function is
    /// `PEM_write_bio_PUBKEY`.
    ///
    /// - Throws: `CryptError.openSSL` when encoding fails.
    package func pem() throws -> [UInt8] {
        try KeyPEMWriter.publicKey(pkey)
    }

    /// Encrypts with RSA-OAEP (SHA-256 for both the OAEP digest and MGF1),
    /// as `openssl pkeyutl -encrypt -pkeyopt rsa_padding_mode:oaep
    /// -pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256` does. The
    /// corresponding C function is `EVP_PKEY_encrypt`.
    ///
    /// - Parameters:
    ///   - plaintext: at most ``rsaModulusBytes`` − 66 bytes (190 for 2048 bits).
    ///   - label: the OAEP label; decryption needs the same one.
    /// - Returns: a ciphertext of ``rsaModulusBytes`` bytes.
    /// - Throws: `CryptError.invalidParameter` when `plaintext` is too long;
    ///   `.invalidKey` for an X25519 key; `.openSSL` when encryption fails.
    package func rsaOAEPEncrypt(_ plaintext: UnsafeRawBufferPointer, label: [UInt8]) throws -> [UInt8] {
        guard case .rsa(let bits) = kind else { throw CryptError.invalidKey("RSA-OAEP needs an RSA key, not an X25519 key") }
        let modulusBytes = (bits + 7) / 8
        // RFC 8017 section 7.1.1: mLen <= k - 2hLen - 2.
        let capacity = modulusBytes - 2 * SHA256.byteCount - 2
        guard plaintext.count <= capacity else {
            throw CryptError.invalidParameter("RSA-OAEP plaintext of \(plaintext.count) bytes; a \(bits)-bit key takes at most \(capacity)")
        }
        return try RSAOAEP.withContext(pkey, label: label, encrypting: true) { ctx throws -> [UInt8] in
            var ciphertext = [UInt8](repeating: 0, count: modulusBytes)
            var length = ciphertext.count
            var empty: UInt8 = 0 // a valid pointer for an empty plaintext
            let ok = withUnsafeMutablePointer(to: &empty) { dummy in
                ciphertext.withUnsafeMutableBufferPointer { out in
                    EVP_PKEY_encrypt(ctx, out.baseAddress, &length,
                                     plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(dummy),
                                     plaintext.count)
                }
            }
            guard ok == 1, length == modulusBytes else { throw openSSLError("EVP_PKEY_encrypt") }
            return ciphertext
        }
    }

    private static func subjectPublicKeyInfoDER(of pkey: OpaquePointer) throws -> [UInt8] {
        let count = i2d_PUBKEY(pkey, nil)
        guard count > 0 else { throw openSSLError("i2d_PUBKEY") }
        var der = [UInt8](repeating: 0, count: Int(count))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress // i2d advances it; the array keeps its own
            return i2d_PUBKEY(pkey, &cursor)
        }
        guard written == count else { throw openSSLError("i2d_PUBKEY") }
        return der
    }

    private static func rawX25519(of pkey: OpaquePointer) throws -> [UInt8] {
        var raw = [UInt8](repeating: 0, count: AsymmetricKeyKind.x25519ByteCount)
        var length = raw.count
        guard EVP_PKEY_get_raw_public_key(pkey, &raw, &length) == 1,
              length == AsymmetricKeyKind.x25519ByteCount else {
            throw openSSLError("EVP_PKEY_get_raw_public_key")
        }
        return raw
    }
}

/// Reads one key from PEM text after ``PEMArmor`` has vetted the armor.
enum PEMKeyReader {
    /// Reads a private key; the caller owns (and frees) the result.
    ///
    /// - Throws: `CryptError.invalidKey` with a specific reason.
    static func readPrivateKey(_ pem: UnsafeRawBufferPointer) throws(CryptError) -> OpaquePointer {
        let armor = try PEMArmor(parsing: pem)
        switch armor.role {
        case .publicKey: throw .invalidKey("expected a private key but found a public key")
        case .other: throw .invalidKey("unsupported PEM label \"\(armor.label)\" (expected \"PRIVATE KEY\")")
        case .privateKey: break
        }
        if armor.isEncrypted { throw .invalidKey("encrypted private keys are not supported") }
        switch armor.label {
        case "PRIVATE KEY", "RSA PRIVATE KEY":
            break
        case "EC PRIVATE KEY": throw .invalidKey("unsupported key type EC")
        case "DSA PRIVATE KEY": throw .invalidKey("unsupported key type DSA")
        default: throw .invalidKey("unsupported PEM label \"\(armor.label)\" (expected \"PRIVATE KEY\")")
        }
        // The callback refuses to give a passphrase and notes that one was
        // asked for: without it OpenSSL would prompt on the terminal. The
        // armor check above already turns encrypted keys away; this is the
        // second line for an encryption marker it did not recognise.
        var passphraseRequested = false
        let pkey = try withBIO(reading: pem, range: armor.range) { bio in
            withUnsafeMutablePointer(to: &passphraseRequested) { flag in
                PEM_read_bio_PrivateKey_ex(bio, nil, { _, _, _, context in
                    context?.assumingMemoryBound(to: Bool.self).pointee = true
                    return -1
                }, UnsafeMutableRawPointer(flag), nil, nil)
            }
        }
        guard let pkey else {
            ERR_clear_error()
            throw .invalidKey(passphraseRequested ? "encrypted private keys are not supported" : "malformed PEM")
        }
        return pkey
    }

    /// Reads a SubjectPublicKeyInfo public key; the caller owns (and frees) the result.
    ///
    /// - Throws: `CryptError.invalidKey` with a specific reason.
    static func readPublicKey(_ pem: UnsafeRawBufferPointer) throws(CryptError) -> OpaquePointer {
        let armor = try PEMArmor(parsing: pem)
        switch armor.role {
        case .privateKey: throw .invalidKey("expected a public key but found a private key")
        case .publicKey where armor.label == "PUBLIC KEY": break
        case .publicKey, .other:
            throw .invalidKey("unsupported PEM label \"\(armor.label)\" (expected \"PUBLIC KEY\")")
        }
        // Public keys are never encrypted, so no passphrase callback is
        // involved: with a nil callback and nil context OpenSSL would only
        // prompt for an encrypted block, which PUBKEY decoding never reads.
        let pkey = try withBIO(reading: pem, range: armor.range) { bio in
            PEM_read_bio_PUBKEY_ex(bio, nil, nil, nil, nil, nil)
        }
        guard let pkey else {
            ERR_clear_error()
            throw .invalidKey("malformed PEM")
        }
        return pkey
    }

    /// Calls `body` with a read-only memory BIO over `input[range]`. The
    /// corresponding C function is `BIO_new_mem_buf`, given the length (so
    /// no NUL terminator is needed and none is looked for).
    private static func withBIO(reading input: UnsafeRawBufferPointer, range: Range<Int>,
                                _ body: (OpaquePointer) -> OpaquePointer?) throws(CryptError) -> OpaquePointer? {
        let block = UnsafeRawBufferPointer(rebasing: input[range])
        // PEMArmor caps the input at 64 KiB, so the length fits an Int32.
        guard let base = block.baseAddress, let length = Int32(exactly: block.count) else {
            throw .invalidKey("malformed PEM")
        }
        guard let bio = BIO_new_mem_buf(base, length) else { throw openSSLError("BIO_new_mem_buf") }
        defer { BIO_free(bio) }
        return body(bio)
    }
}

/// The checks every key passes before CryptCore wraps it.
enum AsymmetricKeyChecks {
    /// The kind of `pkey`, or the reason it is refused.
    ///
    /// - Throws: `CryptError.invalidKey("unsupported key type …")` for
    ///   anything but X25519 and RSA (RSA-PSS keys included: they are for
    ///   signatures only), and for RSA moduli outside 2048…16384 bits.
    static func kind(of pkey: OpaquePointer) throws(CryptError) -> AsymmetricKeyKind {
        if EVP_PKEY_is_a(pkey, "X25519") == 1 { return .x25519 }
        guard EVP_PKEY_is_a(pkey, "RSA") == 1 else {
            throw .invalidKey("unsupported key type \(typeName(of: pkey))")
        }
        let bits = Int(EVP_PKEY_get_bits(pkey))
        guard bits >= AsymmetricKeyKind.minimumRSABits else {
            throw .invalidKey("RSA key has \(bits) bits; at least \(AsymmetricKeyKind.minimumRSABits) are required")
        }
        guard bits <= AsymmetricKeyKind.maximumRSABits else {
            throw .invalidKey("RSA key has \(bits) bits; at most \(AsymmetricKeyKind.maximumRSABits) are supported")
        }
        return .rsa(bits: bits)
    }

    /// Runs OpenSSL's public-key check (`EVP_PKEY_public_check`): for RSA an
    /// odd modulus with no factor below 752 that is not a prime power, and
    /// an odd exponent above 1; for X25519 only that a public key is present.
    /// Cheap (one Miller-Rabin round on a real modulus).
    ///
    /// - Throws: `CryptError.invalidKey` when the check fails.
    static func validatePublicHalf(of pkey: OpaquePointer, kind: AsymmetricKeyKind) throws(CryptError) {
        let problem = switch kind {
        case .rsa: "RSA public key has an invalid modulus or exponent"
        case .x25519: "X25519 key has no public part"
        }
        try runCheck(EVP_PKEY_public_check, on: pkey, failure: problem)
    }

    /// Checks that a private key's private half belongs to its public half.
    /// The corresponding C function is `EVP_PKEY_pairwise_check`.
    ///
    /// A PEM file can pair an RSA modulus with unrelated private numbers (a
    /// damaged or hand-edited key); without this check such an identity is
    /// accepted and every bundle it should open then reports a slot that
    /// "does not open", blaming the bundle instead of the key.
    static func validatePair(of pkey: OpaquePointer, kind: AsymmetricKeyKind) throws(CryptError) {
        let problem = switch kind {
        case .rsa: "RSA private key does not match its public key"
        case .x25519: "X25519 private key does not match its public key"
        }
        try runCheck(EVP_PKEY_pairwise_check, on: pkey, failure: problem)
    }

    /// Runs one of OpenSSL's `EVP_PKEY_*_check` functions on `pkey`.
    ///
    /// - Throws: `CryptError.invalidKey(failure)` when the check fails.
    static func runCheck(_ check: (OpaquePointer?) -> Int32, on pkey: OpaquePointer,
                                 failure: String) throws(CryptError) {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw openSSLError("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard check(ctx) == 1 else {
            ERR_clear_error()
            throw .invalidKey(failure)
        }
    }

    /// A readable name for a key's algorithm (`RSA`, `X25519`, `Ed25519`,
    /// `EC`, …), for messages about a key of the wrong kind.
    static func typeName(of pkey: OpaquePointer) -> String {
        guard let cName = EVP_PKEY_get0_type_name(pkey) else { return "unknown" }
        let name = String(cString: cName)
        let readable = ["ED25519": "Ed25519", "ED448": "Ed448", "DHX": "DH", "RSASSA-PSS": "RSA-PSS"]
        if let nicer = readable[name] { return nicer }
        // The name comes from OpenSSL's provider tables, not from the input;
        // still keep the message printable.
        guard !name.isEmpty, name.utf8.count <= 32, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return "unknown" }
        return name
    }
}

/// RSA-OAEP with SHA-256 for both the OAEP digest and MGF1.
enum RSAOAEP {
    /// Calls `body` with an `EVP_PKEY_CTX` set up for OAEP encryption or
    /// decryption with `pkey` and `label`, and frees it afterwards.
    ///
    /// - Throws: `CryptError.openSSL` when a setting is refused, or what
    ///   `body` throws.
    static func withContext<R>(_ pkey: OpaquePointer, label: [UInt8], encrypting: Bool,
                               _ body: (OpaquePointer) throws -> R) throws -> R {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw openSSLError("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        if encrypting {
            guard EVP_PKEY_encrypt_init(ctx) == 1 else { throw openSSLError("EVP_PKEY_encrypt_init") }
        } else {
            guard EVP_PKEY_decrypt_init(ctx) == 1 else { throw openSSLError("EVP_PKEY_decrypt_init") }
        }
        guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1 else {
            throw openSSLError("EVP_PKEY_CTX_set_rsa_padding")
        }
        guard EVP_PKEY_CTX_set_rsa_oaep_md(ctx, Digests.sha256.pointer) == 1 else {
            throw openSSLError("EVP_PKEY_CTX_set_rsa_oaep_md")
        }
        guard EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, Digests.sha256.pointer) == 1 else {
            throw openSSLError("EVP_PKEY_CTX_set_rsa_mgf1_md")
        }
        // The empty label is the default; OpenSSL 3.0 refuses a NULL label
        // buffer, so only a non-empty one is set.
        if !label.isEmpty {
            guard let length = Int32(exactly: label.count) else {
                throw CryptError.invalidParameter("RSA-OAEP label of \(label.count) bytes")
            }
            // set0 takes ownership of an OPENSSL_malloc'ed buffer, but only on
            // success: on failure OpenSSL returns before freeing it.
            guard let copy = encfs_OPENSSL_malloc(label.count) else { throw openSSLError("OPENSSL_malloc") }
            label.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: label.count) }
            guard EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, copy, length) == 1 else {
                encfs_OPENSSL_free(copy)
                throw openSSLError("EVP_PKEY_CTX_set0_rsa_oaep_label")
            }
        }
        return try body(ctx)
    }
}

/// Writes keys as PEM text, byte for byte as the `openssl` tool does.
enum KeyPEMWriter {
    /// The private key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    /// The corresponding C function is `PEM_write_bio_PKCS8PrivateKey`.
    ///
    /// Written through a secure-heap memory BIO, whose buffer OpenSSL wipes
    /// when it frees it; the result lives in wiping storage.
    static func privateKeyPKCS8(_ pkey: OpaquePointer) throws(CryptError) -> SecureBytes {
        guard let bio = BIO_new(BIO_s_secmem()) else { throw openSSLError("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PKCS8PrivateKey(bio, pkey, nil, nil, 0, nil, nil) == 1 else {
            throw openSSLError("PEM_write_bio_PKCS8PrivateKey")
        }
        let count = Int(BIO_ctrl_pending(bio))
        return try SecureBytes(count: count) { (out: UnsafeMutableRawBufferPointer) throws(CryptError) in
            try MemoryBIO.drain(bio, into: out)
        }
    }

    /// The public key as SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`),
    /// what `openssl pkey -pubout` writes. The corresponding C function is
    /// `PEM_write_bio_PUBKEY`.
    static func publicKey(_ pkey: OpaquePointer) throws(CryptError) -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw openSSLError("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, pkey) == 1 else { throw openSSLError("PEM_write_bio_PUBKEY") }
        var text = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(bio)))
        guard text.withUnsafeMutableBytes({ MemoryBIO.fill($0, from: bio) }) else { throw openSSLError("BIO_read") }
        return text
    }
}

/// Reading out of a memory BIO.
enum MemoryBIO {
    /// Reads exactly `output.count` bytes from `bio`. The corresponding C
    /// function is `BIO_read`.
    ///
    /// - Throws: `CryptError.openSSL` when fewer bytes are available.
    static func drain(_ bio: OpaquePointer, into output: UnsafeMutableRawBufferPointer) throws(CryptError) {
        guard fill(output, from: bio) else { throw openSSLError("BIO_read") }
    }

    /// Reads exactly `output.count` bytes (at least one) from `bio`; false
    /// when fewer are available. The corresponding C function is `BIO_read`.
    static func fill(_ output: UnsafeMutableRawBufferPointer, from bio: OpaquePointer) -> Bool {
        guard let base = output.baseAddress, let count = Int32(exactly: output.count), count > 0 else { return false }
        return BIO_read(bio, base, count) == count
    }
}
