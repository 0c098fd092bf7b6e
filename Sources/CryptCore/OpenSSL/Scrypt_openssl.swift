internal import COpenSSL

/// scrypt (RFC 7914), the memory-hard passphrase KDF.
public enum Scrypt {
    /// Parameters of one derivation, as stored in a passphrase key slot.
    public struct Parameters: Sendable, Equatable {
        /// log2 of the CPU/memory cost N.
        public var logN: UInt8
        /// Block size r.
        public var r: UInt32
        /// Parallelism p.
        public var p: UInt32

        public init(logN: UInt8, r: UInt32, p: UInt32) {
            self.logN = logN
            self.r = r
            self.p = p
        }

        /// The default for new passphrase slots: N = 2^17, r = 8, p = 1
        /// (128 MiB, roughly 0.3–0.5 s on a current x86 core).
        public static let `default` = Parameters(logN: 17, r: 8, p: 1)

        /// The memory one derivation needs, 128 · N · r bytes (plus p · 128 · r).
        public var memoryBytes: UInt64 {
            (UInt64(128) << UInt64(logN)) * UInt64(r) + UInt64(128) * UInt64(r) * UInt64(p)
        }

        /// Refuses parameters that would make opening a bundle a denial of
        /// service: memory above 2 GiB, N outside 2^1…2^30, r·p ≥ 2^30.
        public func validate() throws {
            guard logN >= 1, logN <= 30 else { throw CryptError.invalidParameter("scrypt log2(N) = \(logN)") }
            guard r >= 1, p >= 1, UInt64(r) * UInt64(p) < (1 << 30) else {
                throw CryptError.invalidParameter("scrypt r = \(r), p = \(p)")
            }
            guard memoryBytes <= Scrypt.maximumMemory else {
                throw CryptError.invalidParameter("scrypt needs \(memoryBytes >> 20) MiB, more than the \(Scrypt.maximumMemory >> 20) MiB limit")
            }
        }
    }

    /// The most memory one derivation may use.
    public static let maximumMemory: UInt64 = 2 << 30

    /// Derives `outputCount` bytes from `passphrase`. The corresponding C
    /// function is `EVP_PBE_scrypt`.
    ///
    /// - Throws: `CryptError.invalidParameter` for out-of-range parameters,
    ///   `.openSSL` when the derivation fails.
    public static func deriveKey(passphrase: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer,
                                 parameters: Parameters, outputCount: Int) throws -> SecureBytes {
        try parameters.validate()
        var dummy: UInt8 = 0
        return try SecureBytes(count: outputCount) { (out: UnsafeMutableRawBufferPointer) throws in
            let ok = withUnsafeMutablePointer(to: &dummy) { d -> Int32 in
                let pass = passphrase.baseAddress?.assumingMemoryBound(to: CChar.self)
                    ?? UnsafeRawPointer(d).assumingMemoryBound(to: CChar.self)
                let saltPtr = salt.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(d)
                return EVP_PBE_scrypt(pass, passphrase.count, saltPtr, salt.count,
                                      UInt64(1) << UInt64(parameters.logN), UInt64(parameters.r), UInt64(parameters.p),
                                      parameters.memoryBytes + (1 << 20),
                                      out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count)
            }
            guard ok == 1 else { throw openSSLError("EVP_PBE_scrypt") }
        }
    }
}
