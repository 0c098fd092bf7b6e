internal import COpenSSL

/// An Ed25519 private key (RFC 8032), for signing bundles.
///
/// Kept apart from ``PrivateKey`` on purpose: a signing key signs and does
/// nothing else, and no content key (X25519 or RSA) is ever accepted where
/// a signing key is expected, or the other way round.
///
/// Owns one `EVP_PKEY`, freed in `deinit`. OpenSSL holds the 32-byte
/// private key in `OPENSSL_secure_malloc` memory and wipes it when the key
/// is freed; CryptCore sets up its locked ``SecureHeap`` before any key is
/// generated or read, so that memory is locked and left out of core dumps,
/// as for X25519 ``PrivateKey``s. No other copy is kept: the public half is
/// a separate value, and the PEM text is made only when asked for.
///
/// Sendable because the key never changes after `init`, and OpenSSL 3
/// allows one `EVP_PKEY` to be used from several threads at once as long
/// as each operation has its own context, which every signature creates and
/// frees.
package final class SigningKey: @unchecked Sendable {
    /// The size of a signature in bytes (RFC 8032: R ‖ S, 32 bytes each).
    package static let signatureByteCount = 64

    /// The owned `EVP_PKEY`.
    private let pkey: OpaquePointer

    /// The public half, to publish and to verify with.
    package let publicKey: SigningPublicKey

    /// Takes a reference to `pkey`, an Ed25519 private key (the caller keeps
    /// and frees its own).
    private init(retaining pkey: OpaquePointer) throws(CryptError) {
        let publicKey = try SigningPublicKey(publicHalfOf: pkey)
        guard EVP_PKEY_up_ref(pkey) == 1 else { throw openSSLError("EVP_PKEY_up_ref") }
        self.pkey = pkey
        self.publicKey = publicKey
    }

    deinit {
        EVP_PKEY_free(pkey)
    }

    /// A fresh key from the system random generator. The corresponding C
    /// function is `EVP_PKEY_generate`.
    ///
    /// - Throws: `CryptError.openSSL` when generation fails.
    package static func generate() throws(CryptError) -> SigningKey {
        let pkey = try generatedKey(algorithm: "ED25519")
        defer { EVP_PKEY_free(pkey) }
        return try SigningKey(retaining: pkey)
    }

    /// Reads an unencrypted Ed25519 private key from PKCS#8 PEM text
    /// (`-----BEGIN PRIVATE KEY-----`, as `openssl genpkey -algorithm
    /// ed25519` writes it). Whitespace around the block is ignored. The
    /// corresponding C function is `PEM_read_bio_PrivateKey_ex`, given a
    /// passphrase callback that refuses, so OpenSSL never prompts.
    ///
    /// - Parameter pem: the PEM text; only read, never copied by CryptCore.
    /// - Throws: `CryptError.invalidKey` with the reason: `malformed PEM`,
    ///   `encrypted private keys are not supported`,
    ///   `expected a private key but found a public key`,
    ///   `expected an Ed25519 key, not X25519` (or `RSA`, `EC`, …),
    ///   `Ed25519 private key does not match its public key`.
    package convenience init(pemRepresentation pem: UnsafeRawBufferPointer) throws(CryptError) {
        SecureHeap.prepare() // so OpenSSL puts the private key there
        let pkey = try PEMKeyReader.readPrivateKey(pem)
        defer { EVP_PKEY_free(pkey) }
        try SigningKeyChecks.requireEd25519(pkey)
        try AsymmetricKeyChecks.runCheck(EVP_PKEY_pairwise_check, on: pkey,
                                         failure: "Ed25519 private key does not match its public key")
        try self.init(retaining: pkey)
    }

    /// The key as unencrypted PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`),
    /// byte for byte what `openssl genpkey -algorithm ed25519` writes and
    /// what ``init(pemRepresentation:)`` reads. The corresponding C function
    /// is `PEM_write_bio_PKCS8PrivateKey`.
    ///
    /// Written through a secure-heap memory BIO, whose buffer OpenSSL wipes
    /// when it frees it; the result lives in wiping storage.
    ///
    /// - Throws: `CryptError.openSSL` when encoding fails.
    package var pemRepresentation: SecureBytes {
        get throws(CryptError) { try KeyPEMWriter.privateKeyPKCS8(pkey) }
    }

    /// Signs `message` (pure Ed25519, RFC 8032 section 5.1.6: no prehash,
    /// no context). Deterministic: the same key and message always give the
    /// same signature. The corresponding C function is `EVP_DigestSign`.
    ///
    /// - Parameter message: any number of bytes, including none.
    /// - Returns: 64 bytes, as `openssl pkeyutl -sign -rawin` writes them.
    /// - Throws: `CryptError.openSSL` when signing fails.
    package func signature(for message: UnsafeRawBufferPointer) throws(CryptError) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw openSSLError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        // Ed25519 takes no digest name: it hashes with SHA-512 itself.
        guard EVP_DigestSignInit_ex(ctx, nil, nil, nil, nil, pkey, nil) == 1 else {
            throw openSSLError("EVP_DigestSignInit_ex")
        }
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        var length = signature.count
        var empty: UInt8 = 0 // a valid pointer for an empty message
        let ok = withUnsafeMutablePointer(to: &empty) { dummy in
            signature.withUnsafeMutableBufferPointer { out in
                EVP_DigestSign(ctx, out.baseAddress, &length,
                               message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(dummy),
                               message.count)
            }
        }
        guard ok == 1, length == Self.signatureByteCount else { throw openSSLError("EVP_DigestSign") }
        return signature
    }
}

/// The check that a key read from PEM is an Ed25519 key.
enum SigningKeyChecks {
    /// - Throws: `CryptError.invalidKey("expected an Ed25519 key, not …")`
    ///   naming the key's algorithm (`X25519`, `RSA`, `EC`, `Ed448`, …).
    static func requireEd25519(_ pkey: OpaquePointer) throws(CryptError) {
        guard EVP_PKEY_is_a(pkey, "ED25519") == 1 else {
            throw .invalidKey("expected an Ed25519 key, not \(AsymmetricKeyChecks.typeName(of: pkey))")
        }
    }
}
