internal import COpenSSL

/// Cryptographically secure random bytes.
package enum SecureRandom {
    /// Fills `buffer` with random bytes. The corresponding C function is
    /// `RAND_bytes`.
    ///
    /// - Throws: `CryptError.randomFailure` when the generator fails.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        var offset = 0
        while offset < buffer.count {
            let n = min(buffer.count - offset, 1 << 30)
            guard let base = buffer.baseAddress, RAND_bytes(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(n)) == 1 else {
                throw CryptError.randomFailure
            }
            offset += n
        }
    }

    /// `count` random bytes (for public values such as ids and salts).
    package static func bytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        try out.withUnsafeMutableBytes { (b: UnsafeMutableRawBufferPointer) throws in try fill(b) }
        return out
    }
}
