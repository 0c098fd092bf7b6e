/// A 256-bit key in self-wiping storage.
package struct SymmetricKey: Sendable, Equatable {
    /// The key size in bytes: every key in encfs is 256 bits.
    package static let byteCount = 32

    /// The key bytes, wiped when the last reference goes away.
    package let bytes: SecureBytes

    /// Wraps existing secure storage.
    ///
    /// - Throws: `CryptError.invalidKeySize` unless it holds exactly 32 bytes.
    package init(_ bytes: SecureBytes) throws {
        guard bytes.count == Self.byteCount else { throw CryptError.invalidKeySize(bytes.count) }
        self.bytes = bytes
    }

    /// Copies raw key bytes.
    ///
    /// - Throws: `CryptError.invalidKeySize` unless `raw` holds 32 bytes.
    package init(copying raw: UnsafeRawBufferPointer) throws {
        try self.init(SecureBytes(copying: raw))
    }

    /// A fresh random key.
    package static func random() throws -> SymmetricKey {
        try SymmetricKey(SecureBytes.random(count: byteCount))
    }

    /// Calls `body` with the 32 key bytes.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }

    package static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool { lhs.bytes == rhs.bytes }
}
