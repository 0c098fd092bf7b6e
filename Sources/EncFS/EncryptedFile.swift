import EncFSCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A file of an ``EncryptedBundle``, open for reads at any offset.
///
/// Reads are positional (there is no file position), so one
/// `EncryptedFile` can be read from many threads at once. It holds no
/// descriptor and no key of its own: nothing to close. Each read decrypts
/// only the chunks it covers and authenticates each before returning any
/// of its bytes.
public struct EncryptedFile: Sendable {
    private let reader: BundleReader
    private let entry: IndexEntry

    /// The path the file was opened by, as bytes.
    public let bytePath: [UInt8]

    /// The path the file was opened by (U+FFFD for bytes that are not valid
    /// UTF-8: ``bytePath`` keeps them).
    public var path: String { String(decoding: bytePath, as: UTF8.self) }

    /// The file's length in bytes.
    public var size: UInt64 { entry.fileSize }

    init(reader: BundleReader, entry: IndexEntry, bytePath: [UInt8]) {
        self.reader = reader
        self.entry = entry
        self.bytePath = bytePath
    }

    /// Reads up to `count` bytes starting at `offset`.
    ///
    /// - Parameters:
    ///   - count: the most bytes to read; 0 or less reads nothing.
    ///   - offset: where to start, in bytes from the start of the file.
    /// - Returns: `count` bytes, or fewer only when the file ends first;
    ///   empty at or past the end of the file.
    /// - Throws: ``EncryptedBundleError/damagedChunk(path:chunk:)``, `.io`.
    public func read(upToCount count: Int, atOffset offset: UInt64) throws(EncryptedBundleError) -> Data {
        guard count > 0, offset < entry.fileSize else { return Data() }
        // Never more than the file holds: a huge `count` allocates nothing extra.
        let wanted = Int(min(UInt64(count), entry.fileSize - offset))
        var data = Data(count: wanted)
        let got = try EncryptedBundle.perform(bytePath) {
            try data.withUnsafeMutableBytes { try reader.read(entry, fromOffset: offset, into: $0) }
        }
        return got == wanted ? data : data.prefix(got)
    }

    /// Reads into the caller's buffer starting at `offset`, allocating
    /// nothing.
    ///
    /// - Parameters:
    ///   - buffer: receives the bytes; on a thrown error it holds no
    ///     plaintext of the failed read.
    ///   - offset: where to start, in bytes from the start of the file.
    /// - Returns: the bytes read: `buffer.count`, or fewer only when the
    ///   file ends first; 0 at or past the end.
    /// - Throws: ``EncryptedBundleError/damagedChunk(path:chunk:)``, `.io`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws(EncryptedBundleError) -> Int {
        try EncryptedBundle.perform(bytePath) { try reader.read(entry, fromOffset: offset, into: buffer) }
    }
}

extension EncryptedFile: CustomReflectable {
    /// Only the path and size: `dump` and debuggers do not walk into the
    /// reader, which holds the bundle's keys.
    public var customMirror: Mirror { Mirror(self, children: ["path": path, "size": size]) }
}
