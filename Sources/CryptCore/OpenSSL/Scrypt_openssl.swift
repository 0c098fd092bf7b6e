internal import COpenSSL

/// scrypt (RFC 7914), the memory-hard passphrase KDF.
package enum Scrypt {
    /// Parameters of one derivation, as stored in a passphrase key slot.
    package struct Parameters: Sendable, Equatable {
        /// log2 of the CPU/memory cost N.
        package var logN: UInt8
        /// Block size r.
        package var r: UInt32
        /// Parallelism p.
        package var p: UInt32

        package init(logN: UInt8, r: UInt32, p: UInt32) {
            self.logN = logN
            self.r = r
            self.p = p
        }

        /// The default for new passphrase slots: N = 2^17, r = 8, p = 1
        /// (128 MiB; its time per unlock is in docs/PERFORMANCE.md).
        package static let `default` = Parameters(logN: 17, r: 8, p: 1)

        /// The memory one derivation needs: 128 · r · (N + 2) bytes for V, X
        /// and T, plus 128 · r · p for B. This is OpenSSL's own accounting
        /// (`EVP_PBE_scrypt` refuses to run when it exceeds `maxmem`), not
        /// the textbook 128 · N · r, which falls short by 256 · r.
        ///
        /// Saturates at `UInt64.max` instead of overflowing: the parameters
        /// may come from a corrupt or hostile key slot.
        package var memoryBytes: UInt64 {
            guard logN < 64 else { return .max }
            let (nPlus2, o1) = (UInt64(1) << UInt64(logN)).addingReportingOverflow(2)
            let (perR, o2) = nPlus2.multipliedReportingOverflow(by: 128)
            let (v, o3) = perR.multipliedReportingOverflow(by: UInt64(r))
            // 128 · r < 2^39 and p < 2^32, so B fits in 64 bits.
            let (total, o4) = v.addingReportingOverflow(UInt64(128) * UInt64(r) * UInt64(p))
            return o1 || o2 || o3 || o4 ? .max : total
        }

        /// Refuses parameters that would make opening a bundle a denial of
        /// service, or that OpenSSL would refuse later with an opaque error:
        /// memory above 2 GiB, N outside 2^1…2^30, r·p ≥ 2^30, and (RFC 7914
        /// section 2) N ≥ 2^(16·r), which only bites for r = 1.
        ///
        /// - Throws: `CryptError.invalidParameter`.
        package func validate() throws {
            guard logN >= 1, logN <= 30 else { throw CryptError.invalidParameter("scrypt log2(N) = \(logN)") }
            guard r >= 1, p >= 1, UInt64(r) * UInt64(p) < (1 << 30) else {
                throw CryptError.invalidParameter("scrypt r = \(r), p = \(p)")
            }
            guard UInt64(logN) < 16 * UInt64(r) else {
                throw CryptError.invalidParameter("scrypt log2(N) = \(logN) needs r > \(r)")
            }
            guard memoryBytes <= Scrypt.maximumMemory else {
                throw CryptError.invalidParameter("scrypt needs \(memoryBytes >> 20) MiB, more than the \(Scrypt.maximumMemory >> 20) MiB limit")
            }
        }
    }

    /// The most memory one derivation may use.
    package static let maximumMemory: UInt64 = 2 << 30

    /// Derives `outputCount` bytes from `passphrase`. The corresponding C
    /// function is `EVP_PBE_scrypt`.
    ///
    /// - Throws: `CryptError.invalidParameter` for out-of-range parameters,
    ///   `.openSSL` when the derivation fails.
    package static func deriveKey(passphrase: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer,
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
