internal import COpenSSL

/// HMAC-SHA256 with one OpenSSL context kept for many keys: for a thread
/// that derives a key per file (HKDF runs two HMACs per key).
///
/// The one-shot ``HMACSHA256/authenticationCode(key:data:into:)`` makes
/// and frees a digest context on every call; here OpenSSL's HMAC context is
/// made once and only re-keyed (`EVP_MAC_init` with no parameters), so a
/// tag costs the hashing and no set-up. Not thread-safe:
/// one per thread (the packer's file encryptor). Not kept by the mount
/// daemon's readers: with one per reader workspace, the lock test found
/// the content key in the daemon's memory after a lock
/// (docs/PERFORMANCE.md).
package final class HMACSHA256Context {
    private let context: OpaquePointer

    /// - Throws: `CryptError.openSSL` when OpenSSL cannot make the context.
    package init() throws {
        guard let context = encfs_hmac_sha256_ctx_new(MACs.hmac.pointer) else { throw openSSLError("EVP_MAC_CTX_new") }
        self.context = context
    }

    /// Frees the context, whose last key OpenSSL wipes (`EVP_MAC_CTX_free`).
    deinit { EVP_MAC_CTX_free(context) }

    /// Computes HMAC-SHA256(key, data) into `output` (32 bytes), the same
    /// tag as ``HMACSHA256/authenticationCode(key:data:into:)``. The
    /// corresponding C functions are `EVP_MAC_init`, `EVP_MAC_update` and
    /// `EVP_MAC_final`.
    ///
    /// - Throws: `CryptError.invalidBufferSize` or `.openSSL`.
    package func authenticationCode(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer,
                                   into output: UnsafeMutableRawBufferPointer) throws {
        guard output.count == HMACSHA256.byteCount, let out = output.baseAddress else {
            throw CryptError.invalidBufferSize(what: "HMAC output", expected: HMACSHA256.byteCount, actual: output.count)
        }
        // An empty key is a valid HMAC key; OpenSSL wants a non-null pointer.
        var zero: UInt8 = 0
        let keyed = withUnsafeMutablePointer(to: &zero) { dummy in
            EVP_MAC_init(context, key.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(dummy), key.count, nil)
        }
        guard keyed == 1 else { throw openSSLError("EVP_MAC_init") }
        if let bytes = data.baseAddress, data.count > 0 {
            guard EVP_MAC_update(context, bytes.assumingMemoryBound(to: UInt8.self), data.count) == 1 else {
                throw openSSLError("EVP_MAC_update")
            }
        }
        var length = 0
        guard EVP_MAC_final(context, out.assumingMemoryBound(to: UInt8.self), &length, output.count) == 1,
              length == HMACSHA256.byteCount else { throw openSSLError("EVP_MAC_final") }
    }
}

/// MAC algorithms fetched once: implicit fetching takes a global lock in OpenSSL 3.
final class MACs: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let mac = EVP_MAC_fetch(nil, name, nil) else {
            preconditionFailure("internal error: OpenSSL has no \(name) MAC")
        }
        pointer = mac
    }

    /// HMAC, fetched on first use and kept for the life of the process.
    static let hmac = MACs(name: "HMAC")
}
