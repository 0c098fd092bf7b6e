extension BundleIndex {
    /// Copies the chunk table entries a window serving `chunks` of `entry`
    /// needs into `buffer` (one copy out of the index: one lock on a paged
    /// index).
    ///
    /// - Precondition: `entry` has a chunk table, `chunks` lie within its
    ///   chunks, and `buffer` holds `chunks.count + 1` entries.
    /// - Throws: what reading a page of a paged index throws.
    func chunkTableWindow(of entry: IndexEntry, chunks: Range<UInt64>,
                          into buffer: UnsafeMutableRawBufferPointer) throws -> ChunkTableWindow {
        precondition(entry.hasChunkTable, "internal error: chunk table of a file without one")
        let entries = ChunkTableWindow.entryRange(forChunks: chunks)
        let bytes = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<(entries.count * ChunkTableWindow.entrySize)])
        try pages.copyBytes(at: stringsOffset + Int(entry.chunkTableOffset) + Int(entries.lowerBound) * ChunkTableWindow.entrySize,
                            into: bytes)
        return ChunkTableWindow(entries: UnsafeRawBufferPointer(bytes), firstChunk: chunks.lowerBound)
    }

    /// Bytes the file's body takes in the payload: its sealed chunks,
    /// compressed or not (a body shared by several files is counted for
    /// each).
    ///
    /// - Throws: what reading a page of a paged index throws.
    public func storedSize(of entry: IndexEntry) throws -> UInt64 {
        guard entry.kind == .file else { return 0 }
        guard entry.hasChunkTable else { return layout.ciphertextSize(forPlaintextSize: entry.size) }
        let chunks = layout.chunkCount(forPlaintextSize: entry.size)
        return try pages.withBytes(at: stringsOffset + Int(entry.chunkTableOffset) + Int(chunks - 1) * ChunkTableWindow.entrySize,
                                   count: ChunkTableWindow.entrySize) {
            $0.le64(at: 0) & ~ChunkTableWindow.compressedFlag
        }
    }
}
