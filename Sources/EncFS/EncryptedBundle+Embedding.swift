import EncFSCore
import EncFSRemote

// What the C ABI (Sources/EncFSC) needs beyond the public API: one opener
// that takes a local path as bytes or an address, with both origin checks
// (verifying keys and an expected bundle id) for either. Package access
// only: Swift callers have the public initializers.
extension EncryptedBundle {
    /// Opens the bundle file at the byte path `path`, or the bundle at an
    /// `http://` or `https://` address when `isURL`.
    ///
    /// - Parameters:
    ///   - location: a file path (any bytes but NUL) or an address.
    ///   - isURL: whether `location` is an address.
    ///   - unlock: the secrets that may open a slot.
    ///   - verifyingKeys: keys one of which must have signed the bundle;
    ///     empty for no signature check.
    ///   - bundleID: the 16-byte id the bundle must have, or nil.
    ///   - remote: connections, headers, CA file for an address.
    /// - Throws: as the public initializers.
    package convenience init(location: [UInt8], isURL: Bool, unlock: Unlock, verifyingKeys: [VerifyingKey],
                             bundleID: [UInt8]?, remote: RemoteOptions) throws(EncryptedBundleError) {
        let source: any ByteSource = isURL ? try Self.remoteSource(location, options: remote)
            : try Self.perform([]) { try FileByteSource(path: location) }
        try self.init(source: source, unlock: unlock,
                      origin: OriginPolicy(signers: verifyingKeys.map(\.key), bundleID: bundleID))
    }
}

extension EncryptedBundle.VerifyingKey {
    /// Reads a PEM public key from the file at the byte path `path`.
    ///
    /// - Throws: ``EncryptedBundleError/unusableKey(reason:)``.
    package init(contentsOfFile path: [UInt8]) throws(EncryptedBundleError) {
        key = try EncryptedBundle.perform([]) { try KeyFiles.readVerifyingKeyFile(path) }
    }
}
