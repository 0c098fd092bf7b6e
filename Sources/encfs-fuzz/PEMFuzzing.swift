import CryptCore
import EncFSCore

/// The `pem` target: the input is a key file, read both as a recipient
/// (`PublicKey(pem:)`) and as an identity (`PrivateKey(pem:)`).
///
/// A key that is accepted is used the way encfs uses it: encoded again
/// (DER, PEM, its fingerprint), X25519 agreement with the fixed identity,
/// RSA-OAEP to it and, for a private key of at most 4096 bits (larger ones
/// take too long per input), back again: the round trip must give the
/// same key or fail, never other bytes.
enum PEMFuzzing {
    static func run(_ input: UnsafeRawBufferPointer) {
        if let key = FuzzTarget.attempt("PublicKey(pem:)", { try PublicKey(pem: input) }) {
            use(key)
        }
        if let key = FuzzTarget.attempt("PrivateKey(pem:)", { try PrivateKey(pem: input) }) {
            use(key.publicKey)
            FuzzTarget.attempt("pemPKCS8") {
                let pem = try key.pemPKCS8()
                let again = try pem.withUnsafeBytes { try PrivateKey(pem: $0) }
                FuzzTarget.require(again.kind == key.kind, "PKCS#8 round trip changed the key kind")
            }
            switch key.kind {
            case .x25519:
                FuzzTarget.attempt("x25519SharedSecret") {
                    let ours = try key.x25519SharedSecret(with: FuzzSecrets.x25519Identity.publicKey)
                    let theirs = try FuzzSecrets.x25519Identity.x25519SharedSecret(with: key.publicKey)
                    FuzzTarget.require(ours == theirs, "X25519 agreement is not symmetric")
                }
            case .rsa(let bits) where bits <= 4096:
                FuzzTarget.attempt("RSA-OAEP round trip") {
                    let message = [UInt8](repeating: 0x5A, count: SymmetricKey.byteCount)
                    let sealed = try message.withUnsafeBytes { try key.publicKey.rsaOAEPEncrypt($0, label: [1, 2, 3]) }
                    let opened = try sealed.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: [1, 2, 3]) }
                    FuzzTarget.require(opened.withUnsafeBytes { Array($0) } == message, "RSA-OAEP round trip gave other bytes")
                }
            case .rsa:
                break
            }
        }
    }

    private static func use(_ key: PublicKey) {
        FuzzTarget.attempt("subjectPublicKeyInfoDER") { _ = try key.subjectPublicKeyInfoDER() }
        FuzzTarget.attempt("fingerprint") { _ = try KeySlot.hexFingerprint(of: key) }
        FuzzTarget.attempt("pem") {
            let pem = try key.pem()
            let again = try pem.withUnsafeBytes { try PublicKey(pem: $0) }
            FuzzTarget.require(again.kind == key.kind, "PEM round trip changed the key kind")
        }
        switch key.kind {
        case .x25519:
            FuzzTarget.require(key.x25519Raw?.count == 32, "X25519 key without 32 raw bytes")
            FuzzTarget.attempt("x25519SharedSecret") { _ = try FuzzSecrets.x25519Identity.x25519SharedSecret(with: key) }
        case .rsa:
            FuzzTarget.require(key.rsaModulusBytes != nil, "RSA key without a modulus size")
            FuzzTarget.attempt("rsaOAEPEncrypt") {
                let message = [UInt8](repeating: 0xA5, count: SymmetricKey.byteCount)
                let sealed = try message.withUnsafeBytes { try key.rsaOAEPEncrypt($0, label: []) }
                FuzzTarget.require(sealed.count == key.rsaModulusBytes, "RSA-OAEP ciphertext is not one modulus long")
            }
        }
    }
}
