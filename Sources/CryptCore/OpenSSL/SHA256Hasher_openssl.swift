internal import COpenSSL

extension SHA256 {
    /// An incremental SHA-256: the digest of a message given in pieces,
    /// for messages too large to hold at once (a bundle's sealed index, the
    /// tags of every chunk).
    ///
    /// Owns one `EVP_MD_CTX`, freed in `deinit`; the digest is the one
    /// ``SHA256`` fetched once per process, so no update takes OpenSSL's
    /// global fetch lock. Not thread-safe: one hasher per message.
    ///
    /// Like ``SHA256/hash(_:)`` it does not throw: with a fetched digest,
    /// OpenSSL can only fail to allocate, which is treated like any other
    /// allocation failure in Swift.
    package final class Hasher {
        /// The owned context.
        private let context: OpaquePointer

        /// A hasher at the start of an empty message. The corresponding C
        /// functions are `EVP_MD_CTX_new` and `EVP_DigestInit_ex2`.
        package init() {
            guard let context = EVP_MD_CTX_new() else {
                preconditionFailure("internal error: EVP_MD_CTX_new failed")
            }
            self.context = context
            start()
        }

        deinit {
            EVP_MD_CTX_free(context)
        }

        /// Appends `data` to the message. The corresponding C function is
        /// `EVP_DigestUpdate`.
        package func update(_ data: UnsafeRawBufferPointer) {
            // Nothing to add; OpenSSL would accept a null pointer with
            // length 0 too, but this avoids relying on it.
            guard data.count > 0, let base = data.baseAddress else { return }
            guard EVP_DigestUpdate(context, base, data.count) == 1 else {
                preconditionFailure("internal error: EVP_DigestUpdate(SHA-256) failed")
            }
        }

        /// The digest of everything given to ``update(_:)`` since the hasher
        /// was made or last finalized; the hasher then starts a new, empty
        /// message. The corresponding C function is `EVP_DigestFinal_ex`.
        ///
        /// - Returns: 32 bytes.
        package func finalize() -> [UInt8] {
            var digest = [UInt8](repeating: 0, count: SHA256.byteCount)
            var length: UInt32 = 0
            let ok = digest.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
            guard ok == 1, length == UInt32(SHA256.byteCount) else {
                preconditionFailure("internal error: EVP_DigestFinal_ex(SHA-256) failed")
            }
            start()
            return digest
        }

        /// (Re)starts the context on the fetched SHA-256.
        private func start() {
            guard EVP_DigestInit_ex2(context, Digests.sha256.pointer, nil) == 1 else {
                preconditionFailure("internal error: EVP_DigestInit_ex2(SHA-256) failed")
            }
        }
    }
}
