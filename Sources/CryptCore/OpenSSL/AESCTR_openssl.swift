internal import COpenSSL

/// AES-256 in counter mode positioned inside an AES-GCM message: decrypts
/// any 16-byte-aligned segment of a GCM ciphertext without the rest.
///
/// With a 96-bit nonce, GCM encrypts block k of the message (k = 0, 1, …)
/// with AES-CTR under the counter block `nonce ‖ BE32(k + 2)` (NIST SP
/// 800-38D, section 7.1: J0 = nonce ‖ 1, the first block uses inc32(J0)).
/// This type produces the same keystream from any block on.
///
/// It does **not** authenticate: use it only on a message whose tag was
/// verified before (for example with ``AESGCM/open(key:nonce:aad:tag:pieces:)``)
/// and whose segment is checked against a digest taken then. One value owns
/// one `EVP_CIPHER_CTX`; it is not thread-safe.
package final class AESCTR {
    private let context: OpaquePointer

    /// Allocates a cipher context.
    ///
    /// - Throws: `CryptError.openSSL` when OpenSSL cannot allocate it.
    package init() throws {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw openSSLError("EVP_CIPHER_CTX_new") }
        context = ctx
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Decrypts the segment of a GCM message that starts at `messageOffset`.
    ///
    /// - Parameters:
    ///   - key: the GCM key.
    ///   - nonce: the message's 12-byte GCM nonce.
    ///   - messageOffset: where `ciphertext` starts in the message; a
    ///     multiple of 16.
    ///   - ciphertext: the segment.
    ///   - plaintext: receives `ciphertext.count` bytes (may be the same memory).
    /// - Throws: `CryptError.invalidBufferSize` for a misaligned offset, a
    ///   wrong nonce or output size, or a segment past GCM's 2^32 − 2 block
    ///   limit; `.openSSL` otherwise.
    package func decryptSegment(key: SymmetricKey, nonce: UnsafeRawBufferPointer, messageOffset: Int,
                               ciphertext: UnsafeRawBufferPointer, into plaintext: UnsafeMutableRawBufferPointer) throws {
        guard nonce.count == AESGCM.nonceByteCount else {
            throw CryptError.invalidBufferSize(what: "nonce", expected: AESGCM.nonceByteCount, actual: nonce.count)
        }
        guard plaintext.count == ciphertext.count else {
            throw CryptError.invalidBufferSize(what: "output", expected: ciphertext.count, actual: plaintext.count)
        }
        guard messageOffset >= 0, messageOffset % 16 == 0 else {
            throw CryptError.invalidBufferSize(what: "segment offset", expected: messageOffset - messageOffset % 16, actual: messageOffset)
        }
        // GCM increments only the low 32 bits of the counter; OpenSSL's CTR
        // carries into the nonce. They agree while no segment runs past
        // block 2^32 − 1, which GCM's own message limit already forbids.
        let firstBlock = messageOffset / 16 + 2
        let lastBlock = firstBlock + (ciphertext.count + 15) / 16
        guard lastBlock <= 1 << 32 else {
            throw CryptError.invalidBufferSize(what: "segment end", expected: ((1 << 32) - 2) * 16, actual: messageOffset + ciphertext.count)
        }
        var counter = [UInt8](repeating: 0, count: 16)
        counter.withUnsafeMutableBytes { c in
            c.copyMemory(from: nonce)
            c.storeBytes(of: UInt32(firstBlock).bigEndian, toByteOffset: 12, as: UInt32.self)
        }
        try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws in
            guard EVP_DecryptInit_ex2(context, Ciphers.aes256ctr.pointer, k.bindMemory(to: UInt8.self).baseAddress,
                                      counter, nil) == 1 else { throw openSSLError("EVP_DecryptInit_ex2(CTR)") }
        }
        var offset = 0
        while offset < ciphertext.count {
            let n = min(ciphertext.count - offset, AESGCM.maximumPiece)
            guard let inBase = ciphertext.baseAddress, let outBase = plaintext.baseAddress else { return }
            var outLength: Int32 = 0
            guard EVP_DecryptUpdate(context, outBase.advanced(by: offset).assumingMemoryBound(to: UInt8.self), &outLength,
                                    inBase.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(n)) == 1,
                  Int(outLength) == n else { throw openSSLError("EVP_DecryptUpdate(CTR)") }
            offset += n
        }
    }
}
