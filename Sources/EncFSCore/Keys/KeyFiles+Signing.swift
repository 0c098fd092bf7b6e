import CryptCore

extension KeyFiles {
    /// Reads a signing key: an Ed25519 private key in PEM (PKCS#8), as
    /// `encfs-keygen --sign` or `openssl genpkey -algorithm ed25519` writes.
    ///
    /// - Throws: `KeyInputError` naming the file and what is wrong with it
    ///   (an X25519 identity given by mistake is named as such).
    package static func readSigningKeyFile(_ path: [UInt8]) throws -> SigningKey {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read signing key file: \(e.message)", path: path)
        }
        do {
            return try contents.withUnsafeBytes { (pem) throws(CryptError) in try SigningKey(pemRepresentation: pem) }
        } catch {
            throw KeyInputError("unusable signing key file: \(error.description)", path: path)
        }
    }

    /// Reads a verifying key: an Ed25519 public key in PEM
    /// (SubjectPublicKeyInfo), such as the `.pub` file `encfs-keygen --sign`
    /// writes beside the signing key, or `openssl pkey -pubout` makes.
    ///
    /// - Throws: `KeyInputError` naming the file and what is wrong with it.
    package static func readVerifyingKeyFile(_ path: [UInt8]) throws -> SigningPublicKey {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read verifying key file: \(e.message)", path: path)
        }
        do {
            return try contents.withUnsafeBytes { (pem) throws(CryptError) in try SigningPublicKey(pemRepresentation: pem) }
        } catch {
            throw KeyInputError("unusable verifying key file: \(error.description)", path: path)
        }
    }
}
