/// Errors raised by CryptCore.
///
/// Messages never contain key bytes or plaintext; at most a length.
package enum CryptError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An AEAD tag did not verify: wrong key, wrong associated data, or the
    /// ciphertext or tag was modified. Also raised when RSA-OAEP decryption
    /// fails (wrong key, wrong label, modified ciphertext); every such
    /// failure gives this one case, so callers cannot become a padding oracle.
    /// No plaintext was released.
    case authenticationFailure
    /// A key had the wrong length (the length is given, never the bytes).
    case invalidKeySize(Int)
    /// A nonce, tag or output buffer had the wrong length.
    case invalidBufferSize(what: String, expected: Int, actual: Int)
    /// A KDF parameter is out of the range this build accepts.
    case invalidParameter(String)
    /// A public or private key was refused: malformed PEM, the wrong kind of
    /// key (an X25519 or RSA key where an Ed25519 signing key is expected,
    /// or the other way round), an unsupported algorithm, a too-short RSA
    /// modulus, an encrypted private key, an X25519 peer that makes the
    /// shared secret all zero, or an Ed25519 public key that would accept
    /// forgeries (a small-order point), is not canonically encoded or is
    /// not a curve point.
    /// The message names the reason, never key bytes.
    case invalidKey(String)
    /// The system random generator failed.
    case randomFailure
    /// OpenSSL reported an error; `code` is the first entry of its error queue.
    case openSSL(function: String, code: UInt)

    package var description: String {
        switch self {
        case .authenticationFailure: return "authentication failed"
        case .invalidKeySize(let n): return "invalid key size (\(n) bytes)"
        case .invalidBufferSize(let what, let expected, let actual):
            return "invalid \(what) size (expected \(expected) bytes, got \(actual))"
        case .invalidParameter(let what): return "invalid parameter: \(what)"
        case .invalidKey(let why): return "invalid key: \(why)"
        case .randomFailure: return "random generator failed"
        case .openSSL(let function, let code): return "OpenSSL \(function) failed (error 0x\(String(code, radix: 16)))"
        }
    }
}
