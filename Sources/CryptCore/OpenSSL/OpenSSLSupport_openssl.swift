internal import COpenSSL

/// Turns the OpenSSL error queue into a `CryptError` and clears the queue.
func openSSLError(_ function: String) -> CryptError {
    let code = ERR_get_error()
    ERR_clear_error()
    return .openSSL(function: function, code: UInt(code))
}

/// This thread's OpenSSL error queue.
enum OpenSSLErrorQueue {
    /// Runs `body` and removes every error it queued, leaving the entries
    /// queued before it (and their marks) as they were. For calls whose
    /// failure is an answer, not an error (a full secure heap, a signature
    /// that does not verify). The corresponding C functions are
    /// `ERR_set_mark` and `ERR_pop_to_mark`.
    static func discardingNewErrors<R>(_ body: () -> R) -> R {
        // ERR_set_mark marks the newest entry; on an empty queue there is
        // nothing to mark, and ERR_pop_to_mark then clears to the bottom,
        // which is exactly what `body` added.
        ERR_set_mark()
        defer { ERR_pop_to_mark() }
        return body()
    }

    /// The oldest entry, or 0 when the queue is empty (for tests). The
    /// corresponding C function is `ERR_peek_error`.
    static var oldest: UInt { UInt(ERR_peek_error()) }

    /// Empties the queue (for tests). The corresponding C function is
    /// `ERR_clear_error`.
    static func clear() { ERR_clear_error() }

    /// Makes OpenSSL queue one real error of its own, unrelated to memory:
    /// fetching a cipher that does not exist (for tests).
    static func queueUnrelatedError() {
        if let cipher = EVP_CIPHER_fetch(nil, "ENCFS-NO-SUCH-CIPHER", nil) {
            EVP_CIPHER_free(cipher) // never happens; freed if it did
        }
    }
}

/// `OPENSSL_cleanse` and `CRYPTO_memcmp`, kept here so no other file needs
/// COpenSSL.
enum OpenSSLMemory {
    /// The corresponding C function is `OPENSSL_cleanse`.
    static func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(base, buffer.count)
    }
}

/// Constant-time comparison.
package enum ConstantTime {
    /// True when both buffers have the same length and bytes; the time taken
    /// depends only on the length. The corresponding C function is
    /// `CRYPTO_memcmp`.
    package static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return CRYPTO_memcmp(pa, pb, a.count) == 0
    }
}

/// A new key pair of `algorithm` ("X25519", "ED25519"), made after the
/// secure heap exists so OpenSSL keeps the private half there. The caller
/// owns the result (`EVP_PKEY_free`). The corresponding C function is
/// `EVP_PKEY_generate`.
///
/// - Throws: `CryptError.openSSL` when generation fails.
func generatedKey(algorithm: String) throws(CryptError) -> OpaquePointer {
    SecureHeap.prepare()
    guard let ctx = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
        throw openSSLError("EVP_PKEY_CTX_new_from_name(\(algorithm))")
    }
    defer { EVP_PKEY_CTX_free(ctx) }
    guard EVP_PKEY_keygen_init(ctx) == 1 else { throw openSSLError("EVP_PKEY_keygen_init") }
    var generated: OpaquePointer?
    guard EVP_PKEY_generate(ctx, &generated) == 1, let pkey = generated else {
        throw openSSLError("EVP_PKEY_generate")
    }
    return pkey
}
