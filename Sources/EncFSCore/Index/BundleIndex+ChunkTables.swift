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
        let offset = Int(entry.chunkTableOffset) + Int(entries.lowerBound) * ChunkTableWindow.entrySize
        switch storage {
        case .flat(let pages):
            try pages.copyBytes(at: stringsOffset + offset, into: bytes)
        case .paged(let store):
            try store.copyTableBytes(at: UInt64(offset), into: bytes)
            try checkPagedTableEntries(UnsafeRawBufferPointer(bytes), of: entry, entries: entries)
        }
        return ChunkTableWindow(entries: UnsafeRawBufferPointer(bytes), firstChunk: chunks.lowerBound)
    }

    /// Bytes the file's body takes in the payload: its sealed chunks,
    /// compressed or not (a body shared by several files is counted for
    /// each; a fragment slice's is its share of its fragment's, by size).
    ///
    /// - Throws: what reading a page of a paged index throws.
    package func storedSize(of entry: IndexEntry) throws -> UInt64 {
        guard entry.kind == .file else { return 0 }
        if entry.isFragmentSlice {
            // Its share of its fragment, rounded up: the fragment is stored once for all its slices.
            let fragment = try body(of: entry).body
            let stored = try storedSize(of: fragment)
            let share = stored.multipliedFullWidth(by: entry.fileSize)
            let (quotient, remainder) = fragment.fileSize.dividingFullWidth(share)
            return quotient + (remainder > 0 ? 1 : 0)
        }
        guard entry.hasChunkTable else { return layout.ciphertextSize(forPlaintextSize: entry.fileSize) }
        let chunks = layout(of: entry).chunkCount(forPlaintextSize: entry.fileSize)
        let offset = Int(entry.chunkTableOffset) + Int(chunks - 1) * ChunkTableWindow.entrySize
        switch storage {
        case .flat(let pages):
            return try pages.withBytes(at: stringsOffset + offset, count: ChunkTableWindow.entrySize) {
                ChunkTableWindow.end(ofEntry: ChunkTableWindow.entry(at: 0, in: $0))
            }
        case .paged(let store):
            var last: UInt64 = 0
            try withUnsafeMutableBytes(of: &last) { try store.copyTableBytes(at: UInt64(offset), into: $0) }
            let end = withUnsafeBytes(of: last) { ChunkTableWindow.end(ofEntry: ChunkTableWindow.entry(at: 0, in: $0)) }
            do throws(IndexRules.Violation) {
                try IndexRules.checkInDataRegion(offset: entry.payloadOffset, length: end, dataLength: dataLength,
                                                 position: entry.position)
            } catch {
                throw BundleError.corruptIndex(error.why)
            }
            return end
        }
    }

    /// Checks the chunk table entries a paged index hands a read (its
    /// tables are not checked at open): each consecutive pair describes a
    /// chunk the format allows, and the body ends inside the data region.
    /// A read uses nothing else of the table.
    ///
    /// - Parameter entries: which entries `bytes` holds.
    /// - Throws: `BundleError.corruptIndex` naming the file and chunk.
    private func checkPagedTableEntries(_ bytes: UnsafeRawBufferPointer, of entry: IndexEntry, entries: Range<UInt64>) throws {
        var previousEnd: UInt64 = 0
        let layout = layout(of: entry)
        for (k, chunk) in entries.enumerated() {
            let value = ChunkTableWindow.entry(at: k, in: bytes)
            let end = ChunkTableWindow.end(ofEntry: value)
            if chunk > 0 && k == 0 {
                // The window's first entry only says where its successor starts.
                previousEnd = end
                continue
            }
            let length = UInt64(layout.plaintextRange(ofChunk: chunk, plaintextSize: entry.fileSize).count)
            guard layout.isValidTableEntry(previousEnd: previousEnd, entry: value, plaintextLength: length),
                  entry.payloadOffset <= dataLength, end <= dataLength - entry.payloadOffset else {
                throw BundleError.corruptIndex("file \(entry.position) has an invalid chunk table entry for chunk \(chunk)")
            }
            previousEnd = end
        }
    }
}
