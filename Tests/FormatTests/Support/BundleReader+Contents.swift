import CryptCore
import EncFSCore
import XCTest

extension BundleReader {
    /// The entry at `path` (fails the lookup with the library's error).
    func entry(_ path: [UInt8]) throws -> IndexEntry { try index.resolve(path: path) }

    /// The whole file, read with one call.
    func contents(of entry: IndexEntry) throws -> [UInt8] {
        let key = try fileKey(for: entry)
        var out = [UInt8](repeating: 0, count: Int(entry.fileSize))
        let n = try out.withUnsafeMutableBytes { try read(entry, key: key, fromOffset: 0, into: $0) }
        XCTAssertEqual(n, out.count, "short read of a whole file")
        return out
    }

    func contents(of path: [UInt8]) throws -> [UInt8] { try contents(of: entry(path)) }

    /// Exactly the plaintext of chunk `chunk` (its range computed here from
    /// the chunk size, not by `ChunkLayout`).
    func chunk(_ chunk: UInt64, of entry: IndexEntry) throws -> [UInt8] {
        let cs = UInt64(1) << UInt64(header.layout.chunkSizeLog2)
        let start = chunk * cs
        let count = Int(min(cs, entry.fileSize - start))
        var out = [UInt8](repeating: 0, count: count)
        let key = try fileKey(for: entry)
        let n = try out.withUnsafeMutableBytes { try read(entry, key: key, fromOffset: start, into: $0) }
        XCTAssertEqual(n, count)
        return out
    }
}
