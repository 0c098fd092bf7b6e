/// Offsets of compressed files (format version 2), whose chunks are as
/// long as their chunk table says: the same spaces as the rest of
/// ``ChunkLayout``, with *stored* offsets inside the file's body in place of
/// ciphertext offsets.
extension ChunkLayout {
    /// Where chunk `chunk`'s sealed bytes lie in the file's body, from a
    /// window that serves it.
    package func storedRange(ofChunk chunk: UInt64, in window: ChunkTableWindow) -> Range<UInt64> {
        window.previousEnd(ofChunk: chunk)..<(window.entry(ofChunk: chunk) & ~ChunkTableWindow.compressedFlag)
    }

    /// Where the sealed bytes of the consecutive chunks `chunks` lie in the
    /// file's body (one read fetches them); the window must serve them all.
    package func storedRange(ofChunks chunks: Range<UInt64>, in window: ChunkTableWindow) -> Range<UInt64> {
        guard let last = chunks.last else { return 0..<0 }
        return window.previousEnd(ofChunk: chunks.lowerBound)..<(window.entry(ofChunk: last) & ~ChunkTableWindow.compressedFlag)
    }

    /// How chunk `chunk` is stored.
    package func storedEncoding(ofChunk chunk: UInt64, in window: ChunkTableWindow) -> StoredChunkEncoding {
        window.entry(ofChunk: chunk) & ChunkTableWindow.compressedFlag != 0 ? .zstd : .raw
    }

    /// Where a batch of a compressed file lies in the source, from the
    /// window of its chunks: (source offset, bytes to fetch).
    ///
    /// The index checked at open that the body lies in the data region, so
    /// the sum cannot wrap; a batch's stored bytes are at most its sealed
    /// bytes uncompressed, so they fit the batch buffer.
    func storedBatch(_ batch: ChunkReadPlan.Batch, in window: ChunkTableWindow) -> (sourceOffset: UInt64, byteCount: Int) {
        let range = storedRange(ofChunks: batch.chunks, in: window)
        return (batch.plan.bodyOffset + range.lowerBound, Int(range.count))
    }

    /// Where chunk `slice.chunk`'s sealed bytes lie in the bytes fetched
    /// for `batch` (see ``storedBatch(_:in:)``).
    func storedSealedRange(of slice: ChunkReadPlan.Slice, in batch: ChunkReadPlan.Batch,
                           window: ChunkTableWindow) -> Range<Int> {
        let start = window.previousEnd(ofChunk: batch.chunks.lowerBound)
        let range = storedRange(ofChunk: slice.chunk, in: window)
        return Int(range.lowerBound - start)..<Int(range.upperBound - start)
    }

    /// Whether a chunk table entry pair describes a chunk the format
    /// allows: a raw chunk is exactly its plaintext and tag; a zstd frame
    /// is shorter than that and holds at least one byte.
    ///
    /// - Parameters:
    ///   - previousEnd: where the chunk starts (the previous entry's end).
    ///   - entry: the chunk's entry.
    ///   - plaintextLength: the chunk's plaintext length.
    func isValidTableEntry(previousEnd: UInt64, entry: UInt64, plaintextLength: UInt64) -> Bool {
        let end = entry & ~ChunkTableWindow.compressedFlag
        guard end > previousEnd else { return false }
        let stored = end - previousEnd
        if entry & ChunkTableWindow.compressedFlag != 0 {
            return stored > Self.overhead && stored < plaintextLength + Self.overhead
        }
        return stored == plaintextLength + Self.overhead
    }
}
