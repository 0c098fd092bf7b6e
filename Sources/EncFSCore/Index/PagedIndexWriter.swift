import CryptCore

/// Writes a paged index (format version 2, docs/FORMAT.md "The paged
/// index") from the flat index plaintext `IndexBuilder` serializes: the
/// records are cut into pages of at most 64 KiB (16 KiB when the chunk
/// tables are small: ``smallRecordPageBytes``) that each carry their own
/// names and symlink targets, chunk tables go to a table stream of 64 KiB
/// pages, each page is compressed with zstd when that shrinks it, and each
/// is sealed on its own.
///
/// Two steps, because the header's payload length (in every page's
/// associated data) depends on the pages' sizes: ``build(flat:layout:)``
/// compresses, ``Built/seal(keys:associatedData:)`` seals.
enum PagedIndexWriter {
    /// More entries than this, and an index is paged even in a bundle that
    /// uses no other version 2 feature: the flat index is authenticated and
    /// validated whole at open, which takes more than the 20 ms mount target
    /// from about this size on (docs/PERFORMANCE.md). Smaller bundles
    /// without compression or shared bodies stay version 1.
    static let entryThreshold = 32_768

    /// Whether a bundle with these features and this many entries gets a
    /// paged index.
    static func isPaged(features: BundleFeatures, entryCount: Int) -> Bool {
        features.formatVersion >= BundleFormat.version2 || entryCount > entryThreshold
    }

    /// The zstd level index pages are compressed with.
    static let compressionLevel = 3

    /// Record pages are cut at this size when every table page is at
    /// most this size too (no chunk tables, or few): a reader inflates
    /// and checks a whole page to use one record of it, so a random
    /// lookup over more entries than its cache holds inflates and checks
    /// a quarter of the bytes a 64 KiB page takes (docs/PERFORMANCE.md,
    /// "Many files and the paged index"). A bundle whose chunk tables take more keeps
    /// 64 KiB record pages: its table pages are larger than 16 KiB, and a
    /// reader's cache gives every page a slot of the largest page's size,
    /// so smaller record pages would cache fewer entries in the same
    /// memory there.
    static let smallRecordPageBytes = 16 << 10

    /// The size at which record pages are cut for a table stream of
    /// `tableStreamLength` bytes.
    static func recordPageBytes(tableStreamLength: Int) -> Int {
        tableStreamLength <= smallRecordPageBytes ? smallRecordPageBytes : IndexDirectory.pageSize
    }

    /// Compressed pages, not yet sealed (their plaintext is secret: wiped
    /// by ``wipe()``).
    struct Built {
        /// Page 0's plaintext.
        var head: [UInt8]
        /// Pages 1 … N−1 as stored (a zstd frame, or the plaintext when it
        /// did not shrink).
        var pages: [[UInt8]]

        /// Bytes the sealed index takes: every page plus its tag.
        var sealedLength: UInt64 {
            UInt64(head.count + AESGCM.tagByteCount) + pages.reduce(0) { $0 + UInt64($1.count + AESGCM.tagByteCount) }
        }

        /// Page 0's sealed length (the header records it).
        var headSealedLength: UInt32 { UInt32(head.count + AESGCM.tagByteCount) }

        /// Seals every page under the index key.
        ///
        /// - Parameter base: the index associated data of the bundle's
        ///   final header (`IndexBuilder.associatedData`).
        func seal(keys: BundleKeys, associatedData base: [UInt8]) throws -> [UInt8] {
            let gcm: AESGCM
            do { gcm = try AESGCM() } catch { throw BundleError.crypto("index encryption failed") }
            var out: [UInt8] = []
            out.reserveCapacity(Int(sealedLength))
            try head.withUnsafeBytes {
                try IndexPageSeal.seal($0, page: 0, aad: IndexPageSeal.associatedData(base: base, page: 0, pageCount: nil),
                                       key: keys.indexKey, gcm: gcm, appendingTo: &out)
            }
            for (i, page) in pages.enumerated() {
                let aad = IndexPageSeal.associatedData(base: base, page: i + 1, pageCount: pages.count + 1)
                try page.withUnsafeBytes { try IndexPageSeal.seal($0, page: i + 1, aad: aad, key: keys.indexKey, gcm: gcm, appendingTo: &out) }
            }
            return out
        }

        /// Wipes the plaintext.
        mutating func wipe() {
            head.withUnsafeMutableBytes { SecureBytes.wipe($0) }
            for i in pages.indices { pages[i].withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        }
    }

    /// Cuts a flat index plaintext (as `IndexBuilder.serialize` makes it,
    /// so already consistent) into compressed pages.
    ///
    /// - Parameter fragmentLayout: the units fragments are cut into
    ///   (nil: `layout`'s chunks).
    static func build(flat: [UInt8], layout: ChunkLayout, fragmentLayout: ChunkLayout? = nil) throws -> Built {
        try flat.withUnsafeBytes { try build(flat: $0, layout: layout, fragmentLayout: fragmentLayout) }
    }

    static func build(flat: UnsafeRawBufferPointer, layout: ChunkLayout, fragmentLayout: ChunkLayout? = nil) throws -> Built {
        let count = FlatIndexHeader(flat).entryCount
        let strings = UnsafeRawBufferPointer(rebasing: flat[(FlatIndexHeader.size + count * IndexRecord.size)...])
        let compressor = try ChunkCompressor(level: compressionLevel)
        var pages: [[UInt8]] = []
        var table: [(sealed: UInt32, plain: UInt32, first: UInt32)] = []
        var tables = TableStream()
        defer { tables.wipe() }
        var totals = Totals()
        var suspects: [UInt32] = []
        let pageBytes = recordPageBytes(tableStreamLength: distinctTableBytes(records: flat, count: count, layout: layout))
        var page = PageUnderConstruction(first: 0, limit: pageBytes)
        defer { page.wipe() }

        for position in 0..<count {
            let r = IndexRecord(in: flat, at: position, from: FlatIndexHeader.size)
            let name = slice(strings, at: Int(r.name.offset), count: Int(r.name.length))
            let target = r.kind == .symlink ? slice(strings, at: Int(r.target.offset), count: Int(r.target.length))
                                            : UnsafeRawBufferPointer(start: nil, count: 0)
            if !page.fits(nameBytes: name.count + target.count) {
                try finish(&page, compressor: compressor, into: &pages, table: &table)
                page = PageUnderConstruction(first: position, limit: pageBytes)
            }
            var copy = Array(UnsafeRawBufferPointer(rebasing: flat[(FlatIndexHeader.size + position * IndexRecord.size)...]
                .prefix(IndexRecord.size)))
            defer { copy.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
            IndexRecord.setNameOffset(UInt32(page.strings.count), in: &copy)
            page.strings += name
            switch r.kind {
            case .symlink:
                if SymlinkContainment.isSuspect(target) { suspects.append(UInt32(position)) }
                IndexRecord.setTargetOffset(UInt64(page.strings.count), in: &copy)
                page.strings += target
            case .file:
                let body = try tables.move(tableOf: r, strings: strings, layout: layout, fragmentLayout: fragmentLayout ?? layout,
                                            into: &copy)
                totals.add(fileSize: r.payload.size, body: body)
            default:
                break
            }
            page.records += copy
        }
        try finish(&page, compressor: compressor, into: &pages, table: &table)
        let recordPages = pages.count
        try tables.appendPages(compressor: compressor, into: &pages, table: &table)
        let head = directory(pageTable: table, recordPages: recordPages, entryCount: count,
                             creationTime: FlatIndexHeader(flat).creationTime, totals: totals,
                             tableStreamLength: tables.bytes.count, suspects: suspects)
        return Built(head: head, pages: pages)
    }

    /// Page 0's plaintext (layout in ``IndexDirectory``).
    private static func directory(pageTable table: [(sealed: UInt32, plain: UInt32, first: UInt32)], recordPages: Int,
                                  entryCount: Int, creationTime: Int64, totals: Totals, tableStreamLength: Int,
                                  suspects: [UInt32]) -> [UInt8] {
        var head = IndexDirectory.magic
        head.appendLE(UInt32(table.count + 1))
        head.appendLE(UInt32(recordPages))
        head.appendLE(UInt32(entryCount))
        head.appendLE(UInt32(suspects.count))
        head.appendLE(creationTime)
        head.appendLE(UInt64(totals.files))
        head.appendLE(totals.plaintext)
        head.appendLE(totals.stored)
        head.appendLE(totals.distinctPlaintext)
        head.appendLE(UInt64(tableStreamLength))
        for entry in table {
            head.appendLE(entry.sealed)
            head.appendLE(entry.plain)
            head.appendLE(entry.first)
        }
        for position in suspects { head.appendLE(position) }
        return head
    }

    /// The table stream being filled: each distinct chunk table once, in
    /// the order files first name it.
    private struct TableStream {
        var bytes: [UInt8] = []
        /// Where each table already moved went: string table offset →
        /// table stream offset.
        private var offsets: [UInt32: UInt32] = [:]

        /// Points a file's record copy at its chunk table (a fragment
        /// slice: its fragment's descriptor) in the stream, moving the
        /// table there the first time.
        ///
        /// - Returns: the file's body: where it starts, its plaintext size
        ///   and its stored length (a slice's: its fragment's).
        mutating func move(tableOf r: IndexRecord, strings: UnsafeRawBufferPointer, layout: ChunkLayout, fragmentLayout: ChunkLayout,
                           into copy: inout [UInt8]) throws -> (first: UInt64, size: UInt64, stored: UInt64) {
            let old = r.chunkTable
            if r.flags == IndexEntry.fragmentSliceFlag {
                let descriptor = FragmentDescriptor(slice(strings, at: Int(old), count: FragmentDescriptor.headSize))
                let chunks = Int(fragmentLayout.chunkCount(forPlaintextSize: descriptor.plaintextSize))
                let bytes = slice(strings, at: Int(old), count: FragmentDescriptor.headSize + chunks * ChunkTableWindow.entrySize)
                try place(bytes, from: old, into: &copy)
                let table = UnsafeRawBufferPointer(rebasing: bytes[FragmentDescriptor.headSize...])
                return (descriptor.payloadOffset, descriptor.plaintextSize,
                        ChunkTableWindow.end(ofEntry: ChunkTableWindow.entry(at: chunks - 1, in: table)))
            }
            let size = r.payload.size
            guard r.flags & IndexEntry.hasChunkTableFlag != 0 else {
                return (r.payload.offset, size, layout.ciphertextSize(forPlaintextSize: size))
            }
            let chunks = Int(layout.chunkCount(forPlaintextSize: size))
            let tableBytes = slice(strings, at: Int(old), count: chunks * ChunkTableWindow.entrySize)
            try place(tableBytes, from: old, into: &copy)
            return (r.payload.offset, size, ChunkTableWindow.end(ofEntry: ChunkTableWindow.entry(at: chunks - 1, in: tableBytes)))
        }

        /// Moves `tableBytes` (at `old` in the strings) into the stream the
        /// first time, and points the record copy at them.
        private mutating func place(_ tableBytes: UnsafeRawBufferPointer, from old: UInt32, into copy: inout [UInt8]) throws {
            if let known = offsets[old] {
                IndexRecord.setChunkTable(known, in: &copy)
            } else {
                guard bytes.count + tableBytes.count <= Int(UInt32.max) else {
                    throw BundleError.limitExceeded("chunk tables take more than 4 GiB")
                }
                offsets[old] = UInt32(bytes.count)
                IndexRecord.setChunkTable(UInt32(bytes.count), in: &copy)
                bytes += tableBytes
            }
        }

        /// Cuts the stream into table pages after the record pages.
        func appendPages(compressor: ChunkCompressor, into pages: inout [[UInt8]],
                         table: inout [(sealed: UInt32, plain: UInt32, first: UInt32)]) throws {
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + IndexDirectory.pageSize, bytes.count)
                try bytes.withUnsafeBytes { t in
                    let (stored, plain) = try compressed(UnsafeRawBufferPointer(rebasing: t[offset..<end]), compressor: compressor)
                    pages.append(stored)
                    table.append((UInt32(stored.count + AESGCM.tagByteCount), plain, 0))
                }
                offset = end
            }
        }

        mutating func wipe() { bytes.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
    }

    /// The length the table stream will have: the bytes of every distinct
    /// chunk table (files that share a body share its table).
    private static func distinctTableBytes(records flat: UnsafeRawBufferPointer, count: Int, layout: ChunkLayout) -> Int {
        var seen = Set<UInt32>()
        var total = 0
        for position in 0..<count {
            let r = IndexRecord(in: flat, at: position, from: FlatIndexHeader.size)
            guard r.kind == .file, r.flags != 0, seen.insert(r.chunkTable).inserted else { continue }
            // A fragment slice's size is its own, not its fragment's: a
            // descriptor counts as its head here (a slight underestimate).
            total += r.flags == IndexEntry.fragmentSliceFlag ? FragmentDescriptor.headSize
                : Int(layout.chunkCount(forPlaintextSize: r.payload.size)) * ChunkTableWindow.entrySize
        }
        return total
    }

    /// `count` bytes of `bytes` at `offset` (the flat index is consistent:
    /// the builder made it).
    private static func slice(_ bytes: UnsafeRawBufferPointer, at offset: Int, count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
    }

    /// The record page being filled.
    private struct PageUnderConstruction {
        let first: Int
        /// Bytes a page may take (a record with the longest name and
        /// symlink target takes under 5 KiB: any record fits an empty page).
        let limit: Int
        var records: [UInt8] = []
        var strings: [UInt8] = []

        init(first: Int, limit: Int) {
            self.first = first
            self.limit = limit
        }

        /// Whether one more record with this many string bytes fits.
        func fits(nameBytes: Int) -> Bool {
            records.isEmpty || RecordPage.headerSize + records.count + IndexEntry.recordSize + strings.count + nameBytes
                <= limit
        }

        mutating func wipe() {
            records.withUnsafeMutableBytes { SecureBytes.wipe($0) }
            strings.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        }
    }

    /// Closes a record page: header, records, strings, compressed.
    private static func finish(_ page: inout PageUnderConstruction, compressor: ChunkCompressor, into pages: inout [[UInt8]],
                               table: inout [(sealed: UInt32, plain: UInt32, first: UInt32)]) throws {
        var plain: [UInt8] = []
        plain.reserveCapacity(RecordPage.headerSize + page.records.count + page.strings.count)
        defer { plain.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        RecordPageHeader.append(firstPosition: page.first, recordCount: page.records.count / IndexRecord.size,
                                stringsLength: page.strings.count, to: &plain)
        plain += page.records
        plain += page.strings
        page.wipe()
        let (stored, length) = try plain.withUnsafeBytes { try compressed($0, compressor: compressor) }
        pages.append(stored)
        table.append((UInt32(stored.count + AESGCM.tagByteCount), length, UInt32(page.first)))
    }

    /// A page as stored: one zstd frame when it is shorter than the
    /// plaintext, else the plaintext (a reader tells them apart by length).
    private static func compressed(_ plain: UnsafeRawBufferPointer, compressor: ChunkCompressor) throws -> ([UInt8], UInt32) {
        var out = [UInt8](repeating: 0, count: max(plain.count - 1, 0))
        let n = out.withUnsafeMutableBytes { compressor.compress(plain, into: $0) }
        let exact = n.map { Array(out[0..<$0]) } ?? Array(plain)
        out.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        out = exact
        return (out, UInt32(plain.count))
    }

    /// What page 0 records of the files.
    private struct Totals {
        var files = 0
        var plaintext: UInt64 = 0
        var stored: UInt64 = 0
        var distinctPlaintext: UInt64 = 0
        var seenBodies = Set<UInt64>()

        mutating func add(fileSize: UInt64, body: (first: UInt64, size: UInt64, stored: UInt64)) {
            files += 1
            plaintext &+= fileSize
            if body.stored > 0, seenBodies.insert(body.first).inserted {
                stored &+= body.stored
                distinctPlaintext &+= body.size
            }
        }
    }
}
