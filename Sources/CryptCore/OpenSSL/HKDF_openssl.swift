/// HKDF-SHA256 (RFC 5869), built on ``HMACSHA256``.
///
/// Written over HMAC rather than `EVP_KDF` because the OSSL_PARAM interface
/// needs C-string parameter names that must outlive the call, which Swift's
/// string bridging does not guarantee; the construction is ten lines and is
/// checked against the RFC 5869 vectors.
package enum HKDF {
    /// Derives `outputCount` bytes (at most 255 × 32) from `inputKey`.
    ///
    /// - Parameters:
    ///   - inputKey: the input keying material.
    ///   - salt: optional salt; empty means 32 zero bytes, as the RFC says.
    ///   - info: context and application specific information.
    ///   - outputCount: how many bytes to derive.
    ///   - context: an HMAC context to compute with (a thread that derives
    ///     many keys keeps one: no per-call lookups in OpenSSL); nil uses
    ///     the one-shot HMAC.
    /// - Returns: the output keying material in wiping storage.
    /// - Throws: `CryptError.invalidParameter` when `outputCount` is too large.
    package static func deriveKey(inputKey: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer,
                                 info: UnsafeRawBufferPointer, outputCount: Int,
                                 using context: HMACSHA256Context? = nil) throws -> SecureBytes {
        let hashLength = HMACSHA256.byteCount
        guard outputCount > 0, outputCount <= 255 * hashLength else {
            throw CryptError.invalidParameter("HKDF output length \(outputCount)")
        }
        func mac(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws {
            if let context {
                try context.authenticationCode(key: key, data: data, into: output)
            } else {
                try HMACSHA256.authenticationCode(key: key, data: data, into: output)
            }
        }
        // Extract: PRK = HMAC(salt, IKM).
        let zeroSalt = [UInt8](repeating: 0, count: hashLength)
        let prk = try SecureBytes(count: hashLength) { (p: UnsafeMutableRawBufferPointer) throws in
            if salt.count == 0 {
                try zeroSalt.withUnsafeBytes { (z: UnsafeRawBufferPointer) throws in
                    try mac(key: z, data: inputKey, into: p)
                }
            } else {
                try mac(key: salt, data: inputKey, into: p)
            }
        }
        // Expand: T(i) = HMAC(PRK, T(i-1) || info || i). T(i) is output key
        // material, so the buffers holding it are secure scratch, not arrays:
        // `input` holds T(i-1) || info || i, `block` holds T(i).
        let inputCount = hashLength + info.count + 1
        return try SecureBytes(count: outputCount) { (out: UnsafeMutableRawBufferPointer) throws in
            try prk.withUnsafeBytes { (prkBytes: UnsafeRawBufferPointer) throws in
                try SecureBytes.withScratch(count: inputCount + hashLength) { (scratch: UnsafeMutableRawBufferPointer) throws in
                    let input = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<inputCount])
                    let block = UnsafeMutableRawBufferPointer(rebasing: scratch[inputCount...])
                    var previous = 0 // length of T(i-1) held at the start of `input`
                    var produced = 0
                    var counter: UInt8 = 1
                    while produced < outputCount {
                        if info.count > 0 {
                            UnsafeMutableRawBufferPointer(rebasing: input[previous..<(previous + info.count)]).copyMemory(from: info)
                        }
                        input[previous + info.count] = counter
                        let message = UnsafeRawBufferPointer(rebasing: input[0..<(previous + info.count + 1)])
                        try mac(key: prkBytes, data: message, into: block)
                        let take = min(hashLength, outputCount - produced)
                        UnsafeMutableRawBufferPointer(rebasing: out[produced..<(produced + take)])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: block[0..<take]))
                        UnsafeMutableRawBufferPointer(rebasing: input[0..<hashLength]).copyMemory(from: UnsafeRawBufferPointer(block))
                        previous = hashLength
                        produced += take
                        counter &+= 1
                    }
                }
            }
        }
    }

    /// Derives a 256-bit key.
    package static func deriveKey(from key: SymmetricKey, salt: [UInt8], info: [UInt8]) throws -> SymmetricKey {
        let bytes = try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws in
            try salt.withUnsafeBytes { (s: UnsafeRawBufferPointer) throws in
                try info.withUnsafeBytes { (i: UnsafeRawBufferPointer) throws in
                    try deriveKey(inputKey: k, salt: s, info: i, outputCount: SymmetricKey.byteCount)
                }
            }
        }
        return try SymmetricKey(bytes)
    }
}
