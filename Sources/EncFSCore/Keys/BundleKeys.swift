import CryptCore

/// The keys derived from a bundle's content key, each for one purpose.
///
/// Derivation (HKDF-SHA256, salt = bundle id unless stated):
/// - header MAC key: info "encfs v1 header mac";
/// - index key: info "encfs v1 index";
/// - file key: salt = the file's 16-byte random id, info "encfs v1 file" ‖ bundle id;
/// - key commitment (public, 32 bytes): info "encfs v1 key commitment".
///
/// `package`, like everything that returns it: no key of a bundle is
/// reachable through the public API (``EncryptedBundle`` never hands one out).
package struct BundleKeys: Sendable {
    /// The random 256-bit key every other key derives from.
    package let contentKey: SymmetricKey
    /// The bundle id the keys are bound to.
    package let bundleID: [UInt8]
    /// Authenticates the header (HMAC-SHA256).
    package let headerMACKey: SymmetricKey
    /// Seals the index (AES-256-GCM).
    package let indexKey: SymmetricKey
    /// What a signature records of the content key (``BundleSignature``):
    /// one-way, so it can be public, and no other key gives it.
    package let keyCommitment: [UInt8]
    /// The file keys' HKDF info, "encfs v1 file" ‖ bundle id: the same for
    /// every file, so made once instead of at each file's first read.
    private let fileKeyInfo: [UInt8]

    /// Derives the header and index keys.
    ///
    /// - Throws: `BundleError.crypto` if a derivation fails.
    package init(contentKey: SymmetricKey, bundleID: [UInt8]) throws {
        self.contentKey = contentKey
        self.bundleID = bundleID
        fileKeyInfo = BundleFormat.labelFile + bundleID
        do {
            headerMACKey = try HKDF.deriveKey(from: contentKey, salt: bundleID, info: BundleFormat.labelHeaderMAC)
            indexKey = try HKDF.deriveKey(from: contentKey, salt: bundleID, info: BundleFormat.labelIndex)
            keyCommitment = try HKDF.deriveKey(from: contentKey, salt: bundleID, info: BundleFormat.labelKeyCommitment)
                .withUnsafeBytes { Array($0) }
        } catch {
            throw BundleError.crypto("key derivation failed")
        }
    }

    /// The key that seals the chunks of the file with id `fileID`.
    ///
    /// - Parameters:
    ///   - fileID: the 16-byte file id from the file's index record.
    ///   - context: the calling thread's HMAC context, when it derives many
    ///     file keys (a reader's workspace, the packer); nil for one-off use.
    /// - Throws: `BundleError.crypto` if the derivation fails.
    package func fileKey(fileID: UnsafeRawBufferPointer, using context: HMACSHA256Context? = nil) throws -> SymmetricKey {
        do {
            let bytes = try contentKey.withUnsafeBytes { k in
                try fileKeyInfo.withUnsafeBytes { i in
                    try HKDF.deriveKey(inputKey: k, salt: fileID, info: i, outputCount: SymmetricKey.byteCount, using: context)
                }
            }
            return try SymmetricKey(bytes)
        } catch {
            throw BundleError.crypto("file key derivation failed")
        }
    }
}
