internal import COpenSSL

/// SHA-256 (FIPS 180-4), for public values such as key fingerprints.
package enum SHA256 {
    /// The digest size in bytes.
    package static let byteCount = 32

    /// The SHA-256 digest of `data`. The corresponding C function is
    /// `EVP_Digest`, with the digest fetched once per process.
    ///
    /// Does not throw: with a fetched digest, `EVP_Digest` can only fail to
    /// allocate its context, which is treated like any other allocation
    /// failure in Swift.
    ///
    /// - Returns: 32 bytes.
    package static func hash(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        var empty: UInt8 = 0 // a valid pointer for empty input
        let ok = withUnsafeMutablePointer(to: &empty) { dummy in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(data.baseAddress ?? UnsafeRawPointer(dummy), data.count, out.baseAddress, &length,
                           Digests.sha256.pointer, nil)
            }
        }
        guard ok == 1, length == UInt32(byteCount) else {
            preconditionFailure("internal error: EVP_Digest(SHA-256) failed")
        }
        return digest
    }

    /// Writes the SHA-256 digest of `data` into `digest` (32 bytes), without
    /// allocating. The corresponding C function is `EVP_Digest`.
    package static func hash(_ data: UnsafeRawBufferPointer, into digest: UnsafeMutableRawBufferPointer) {
        precondition(digest.count == byteCount, "internal error: SHA-256 output of \(digest.count) bytes")
        var length: UInt32 = 0
        var empty: UInt8 = 0
        let ok = withUnsafeMutablePointer(to: &empty) { dummy in
            EVP_Digest(data.baseAddress ?? UnsafeRawPointer(dummy), data.count,
                       digest.bindMemory(to: UInt8.self).baseAddress, &length, Digests.sha256.pointer, nil)
        }
        guard ok == 1, length == UInt32(byteCount) else {
            preconditionFailure("internal error: EVP_Digest(SHA-256) failed")
        }
    }
}
