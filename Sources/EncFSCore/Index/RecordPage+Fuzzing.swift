extension RecordPage {
    /// Checks untrusted record page plaintext as a reader checks a page it
    /// loads, against rules taken from the page itself (the fuzzer's
    /// `index-page` target): 4 KiB chunks, 1 MiB of chunk data, a 64 KiB
    /// table stream, as many entries as the page's own positions need plus
    /// 16, and no symlink listed as leading outside.
    ///
    /// - Parameter compressed: whether files may have chunk tables.
    /// - Parameter fragments: whether files may be fragment slices (with
    ///   `compressed`; a slice's descriptor head must lie in the table stream).
    /// - Returns: each record's position, parent and name, in order, when the page passes.
    /// - Throws: `BundleError.corruptIndex` as the reader would.
    package static func checkedRecords(ofPage page: UnsafeRawBufferPointer, compressed: Bool, fragments: Bool = false) throws
        -> [(position: Int, parent: Int, name: [UInt8])] {
        guard page.count >= headerSize, page.count <= IndexDirectory.pageSize else {
            throw BundleError.corruptIndex("index page 1: length \(page.count)")
        }
        let header = RecordPageHeader(page)
        let (first, count) = (header.firstPosition, header.recordCount)
        guard count >= 1, count <= (page.count - headerSize) / IndexEntry.recordSize, first <= (1 << 24) else {
            throw BundleError.corruptIndex("index page 1: \(count) records from \(first)")
        }
        let features = BundleFeatures(formatVersion: BundleFormat.version2, compression: compressed ? .zstd : .none,
                                      compressionLevel: compressed ? 3 : 0, pagedIndexHeadLength: 1,
                                      hasFragments: compressed && fragments)
        let rules = Rules(layout: ChunkLayout(chunkSizeLog2: 12), dataLength: 1 << 20, features: features,
                          entryCount: first + count + 16, tableStreamLength: 1 << 16, suspectSymlinks: [])
        try validate(page, page: 1, positions: first..<(first + count), rules: rules)
        let stringsStart = headerSize + count * IndexEntry.recordSize
        return (0..<count).map { i in
            let r = IndexRecord(in: page, at: i, from: headerSize)
            let offset = stringsStart + Int(r.name.offset)
            return (first + i, r.parent, Array(page[offset..<(offset + Int(r.name.length))]))
        }
    }
}

extension RecordPage {
    /// Cuts flat index plaintext that ``BundleIndex`` accepted into record
    /// pages as `PagedIndexWriter` does, and checks each page as a reader
    /// checks a page it loads (the fuzzer's `index` target): the flat and
    /// the page rules (``IndexRules``) must agree on what a valid index is.
    ///
    /// - Throws: `BundleError.corruptIndex` naming the page that failed.
    package static func checkPagedCopy(ofFlatIndex flat: UnsafeRawBufferPointer, layout: ChunkLayout, dataLength: UInt64,
                                       features: BundleFeatures, decompressor: ChunkDecompressor) throws {
        var built = try PagedIndexWriter.build(flat: flat, layout: layout, fragmentLayout: features.fragmentLayout(files: layout))
        defer { built.wipe() }
        let directory = try built.head.withUnsafeBytes {
            try IndexDirectory($0, remainingLength: built.sealedLength - UInt64(built.headSealedLength))
        }
        let rules = Rules(layout: layout, dataLength: dataLength, features: features, entryCount: directory.entryCount,
                          tableStreamLength: directory.tableStreamLength, suspectSymlinks: directory.suspectSymlinks)
        for page in 1...directory.recordPageCount {
            var plain = [UInt8](repeating: 0, count: Int(directory.plainLengths[page - 1]))
            let stored = built.pages[page - 1]
            if stored.count == plain.count {
                plain = stored
            } else {
                let inflated = stored.withUnsafeBytes { s in plain.withUnsafeMutableBytes { decompressor.decompress(s, into: $0) } }
                guard inflated else { throw BundleError.corruptIndex("index page \(page): does not inflate") }
            }
            try plain.withUnsafeBytes { try validate($0, page: page, positions: directory.positions(ofRecordPage: page), rules: rules) }
        }
    }

    /// The record pages a paged index of `flat` (index plaintext as
    /// `IndexBuilder` writes it) would hold, as stored: a zstd frame, or
    /// the plaintext when it does not shrink (for the fuzzer's seeds).
    ///
    /// - Returns: each page's stored bytes and its plaintext length.
    package static func storedRecordPages(ofFlatIndex flat: [UInt8], chunkSizeLog2: UInt8) throws -> [(stored: [UInt8], length: Int)] {
        var built = try PagedIndexWriter.build(flat: flat, layout: ChunkLayout(chunkSizeLog2: chunkSizeLog2))
        defer { built.wipe() }
        let directory = try built.head.withUnsafeBytes {
            try IndexDirectory($0, remainingLength: built.sealedLength - UInt64(built.headSealedLength))
        }
        return (0..<directory.recordPageCount).map { (built.pages[$0], Int(directory.plainLengths[$0])) }
    }
}
