/// A private key file and its recipient (public key) file.
struct Identity: Sendable {
    /// The private key (PEM).
    let key: String
    /// The public key (PEM).
    let recipient: String
    /// 16 hex digits: the first 8 bytes of SHA-256 over the DER
    /// SubjectPublicKeyInfo, as computed by the `openssl` command line.
    let fingerprint: String
}
