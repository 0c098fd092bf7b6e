import CryptCore
@testable import EncFSCore
import XCTest

/// Edits that only a holder of the content key can make, for tests of
/// what the format still catches then: the index opened, changed and
/// sealed again; a chunk sealed again.
enum KeyHolderEdits {
    /// Opens the sealed index of the bundle at `path`, lets `edit` change
    /// its plaintext (same length), and seals it again in place.
    static func editIndex(_ path: [UInt8], reader: BundleReader, _ edit: (inout [UInt8]) throws -> Void) throws {
        let header = reader.header
        let start = header.headerLength + Int(header.indexOffset)
        let file = try FileTree.readFile(path)
        let sealed = Array(file[start..<(start + Int(header.indexLength))])
        let gcm = try AESGCM()
        let aad = IndexBuilder.associatedData(header)
        var plaintext = try sealed.withUnsafeBytes {
            try gcm.open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad, sealed: $0)
        }.withUnsafeBytes { Array($0) }
        try edit(&plaintext)
        let resealed = try gcm.seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad,
                                    plaintext: SecureBytes(copying: plaintext))
        try SignedBundles.overwrite(path, at: start, with: resealed)
    }

    /// Offset of record `position` in the index plaintext.
    static func record(_ position: Int) -> Int { BundleIndex.headerSize + position * IndexEntry.recordSize }

    /// Offset of the string table in the index plaintext of `reader`.
    static func strings(_ reader: BundleReader) -> Int { BundleIndex.headerSize + reader.index.count * IndexEntry.recordSize }

    /// Little-endian u64 at `offset` of `bytes`.
    static func le64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }

    /// Writes `value` little-endian at `offset` of `bytes`.
    static func storeLE64(_ value: UInt64, into bytes: inout [UInt8], at offset: Int) {
        for k in 0..<8 { bytes[offset + k] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(k))) }
    }
}
