/// A private key file and its recipient (public key) file.
public struct Identity: Sendable {
    /// The private key (PEM).
    public let key: String
    /// The public key (PEM).
    public let recipient: String
    /// 16 hex digits: the first 8 bytes of SHA-256 over the DER
    /// SubjectPublicKeyInfo, as computed by the `openssl` command line.
    public let fingerprint: String

    public init(key: String, recipient: String, fingerprint: String) {
        self.key = key
        self.recipient = recipient
        self.fingerprint = fingerprint
    }
}
