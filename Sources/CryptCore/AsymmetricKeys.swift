/// What an asymmetric key is for, and how big it is.
///
/// ``PrivateKey`` and ``PublicKey`` accept two kinds: X25519 for key
/// agreement and RSA for OAEP encryption. Every other algorithm is refused
/// when a key is read (`CryptError.invalidKey("unsupported key type …")`),
/// Ed25519 included: signing keys are types of their own, ``SigningKey``
/// and ``SigningPublicKey``, so a key can never serve both purposes.
package enum AsymmetricKeyKind: Sendable, Equatable {
    /// An X25519 key (RFC 7748): 32-byte keys, Diffie-Hellman only.
    case x25519
    /// An RSA key whose modulus has `bits` bits, used with OAEP and SHA-256.
    case rsa(bits: Int)

    /// The smallest RSA modulus accepted (NIST SP 800-57: 112-bit security).
    package static let minimumRSABits = 2048
    /// The largest RSA modulus accepted. This is OpenSSL's own limit
    /// (`OPENSSL_RSA_MAX_MODULUS_BITS`): it refuses to use bigger keys, so
    /// they are refused when read, with a message, instead of failing later.
    package static let maximumRSABits = 16384
    /// The size of an X25519 public key, private key and shared secret.
    package static let x25519ByteCount = 32
}
