/// A window of one compressed file's chunk table: the entries a read
/// needs, copied out of the index into the reader's own buffer.
///
/// A chunk table (format version 2) has one u64 little-endian entry per
/// chunk: bits 0 … 62 are the end of the chunk's sealed bytes, counted from
/// the start of the file's body, and bit 63 is set when the chunk is a zstd
/// frame (clear when it is stored raw). Chunk `k` starts where chunk `k − 1`
/// ends (chunk 0 at 0), so any chunk is found in O(1).
///
/// The window holds the entries of chunks `firstChunk − 1 … lastChunk`
/// (from chunk 0 when `firstChunk` is 0): ``ChunkLayout`` reads it.
package struct ChunkTableWindow {
    /// The entries, 8 bytes each.
    let entries: UnsafeRawBufferPointer
    /// The first chunk the window serves.
    let firstChunk: UInt64

    /// Bit 63 of an entry: the chunk is a zstd frame.
    static let compressedFlag: UInt64 = 1 << 63
    /// Bytes per entry.
    package static let entrySize = 8

    /// - Parameters:
    ///   - entries: entries of chunks `firstChunk − 1` (when > 0) through
    ///     the last chunk served.
    ///   - firstChunk: the first chunk served.
    init(entries: UnsafeRawBufferPointer, firstChunk: UInt64) {
        self.entries = entries
        self.firstChunk = firstChunk
    }

    /// The raw entry of `chunk`, which the window must serve.
    func entry(ofChunk chunk: UInt64) -> UInt64 {
        let slot = Int(chunk - firstChunk) + (firstChunk > 0 ? 1 : 0)
        return Self.entry(at: slot, in: entries)
    }

    /// Where `chunk`'s predecessor ends: 0 for chunk 0.
    func previousEnd(ofChunk chunk: UInt64) -> UInt64 {
        guard chunk > 0 else { return 0 }
        let slot = Int(chunk - firstChunk) + (firstChunk > 0 ? 1 : 0) - 1
        return Self.end(ofEntry: Self.entry(at: slot, in: entries))
    }

    /// Entry `index` of table bytes (8 bytes each, little-endian), raw:
    /// the one place that reads an entry's bytes.
    @inline(__always)
    static func entry(at index: Int, in bytes: UnsafeRawBufferPointer) -> UInt64 {
        bytes.le64(at: index * entrySize)
    }

    /// Where the chunk a raw entry describes ends (the entry without its flag).
    @inline(__always)
    static func end(ofEntry entry: UInt64) -> UInt64 { entry & ~compressedFlag }

    /// Where chunks `chunks` lie in the table, as entry indices: the
    /// entries a window serving them needs.
    static func entryRange(forChunks chunks: Range<UInt64>) -> Range<UInt64> {
        (chunks.lowerBound > 0 ? chunks.lowerBound - 1 : 0)..<chunks.upperBound
    }
}
