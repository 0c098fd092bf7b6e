import EncFSCore
import CryptCore

extension EncryptedBundle {
    /// A public key a bundle must be signed by: an Ed25519 public key, such
    /// as the `.pub` file `encfs-keygen --sign` writes beside the signing key
    /// that `encfs-pack --sign-key` uses.
    ///
    /// Give one or more to an initializer that takes `verifyingSignatureWith:`,
    /// and a bundle opens only when one of them signed it. Without a
    /// signature check, opening proves only that a bundle was made *for*
    /// the key that opens it: anyone who has a recipient's public key can
    /// pack a bundle it opens.
    ///
    /// ```swift
    /// let ci = try EncryptedBundle.VerifyingKey(contentsOfFile: "ci.sign.pub")
    /// let bundle = try EncryptedBundle(path: "app.bundle", unlock: .identityFile("host.key"),
    ///                                  verifyingSignatureWith: [ci])
    /// ```
    public struct VerifyingKey: Sendable, Equatable {
        let key: SigningPublicKey

        /// Reads a PEM public key (`-----BEGIN PUBLIC KEY-----`) from a file.
        ///
        /// - Parameter path: the key file's path in the file system.
        /// - Throws: ``EncryptedBundleError/unusableKey(reason:)`` naming the
        ///   file and what is wrong with it (missing, not PEM, not Ed25519).
        public init(contentsOfFile path: String) throws(EncryptedBundleError) {
            key = try EncryptedBundle.perform([]) { try KeyFiles.readVerifyingKeyFile(Array(path.utf8)) }
        }

        /// Reads a PEM public key from its text.
        ///
        /// - Throws: ``EncryptedBundleError/unusableKey(reason:)``.
        public init(pem: some Collection<UInt8>) throws(EncryptedBundleError) {
            let bytes = Array(pem)
            do {
                key = try bytes.withUnsafeBytes { (raw) throws(CryptError) in try SigningPublicKey(pemRepresentation: raw) }
            } catch {
                throw .unusableKey(reason: "verifying key: \(error)")
            }
        }

        /// The key's fingerprint, 16 hex digits: what `encfs-keygen --sign`
        /// and `encfs-inspect info` show, and what
        /// ``EncryptedBundleError/untrustedSigner(fingerprint:)`` names.
        public var fingerprint: String { BundleSignature.fingerprint(of: key) }
    }
}
