import CryptCore

/// One AES-GCM message sealed under fresh random key and nonce, with
/// everything needed to open it (corruption and segment tests).
struct SealedMessage {
    var key: SymmetricKey
    var nonce: [UInt8]
    var aad: [UInt8]
    let plaintext: [UInt8]
    var ciphertext: [UInt8]
    var tag: [UInt8]

    /// Seals `size` random bytes under a random key and nonce.
    init(size: Int, aad: [UInt8], gcm: AESGCM) throws {
        key = try SymmetricKey.random()
        nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
        self.aad = aad
        plaintext = try SecureRandom.bytes(size)
        ciphertext = [UInt8](repeating: 0, count: size)
        tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext, into: &ciphertext, tag: &tag)
    }
}
