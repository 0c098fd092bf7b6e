import CryptCore

/// Checks flat index plaintext (layout in ``BundleIndex``) against every
/// rule of the format (``IndexRules``), reading it front to back: records
/// in batches, names as they come, each parent once per run of siblings,
/// so an index paged in from the bundle is validated with a bounded cache.
///
/// One validation per value: ``run()`` consumes it; the scratch buffers
/// are wiped and freed when it goes.
struct FlatIndexValidator: ~Copyable {
    /// What the rest of the index needs from the validation.
    struct Result {
        var count: Int
        var creationTime: Int64
        var totalFileBytes: UInt64
        var fileCount: Int
        var parentPositions: [UInt32]
        var subdirectoryCounts: [UInt32]
        var suspectSymlinkPositions: [UInt32]
        var storedFileBytes: UInt64
        var distinctFileBytes: UInt64
    }

    /// Records validated per copy out of the pages.
    private static let recordBatch = 256
    /// Bytes a name may take, rounded up (BundleFormat.maximumNameLength).
    private static let nameCapacity = 256

    private let pages: IndexPages
    private let layout: ChunkLayout
    private let dataLength: UInt64
    private let features: BundleFeatures
    private let header: FlatIndexHeader
    private let stringsStart: Int

    // Scratch for a batch of records and two names; wiped on the way out.
    private let batch: UnsafeMutableRawBufferPointer
    private let names: UnsafeMutableRawBufferPointer
    /// The names of a batch in one piece when they lie together (encfs-pack
    /// writes them in record order): one copy out of the page cache per
    /// batch instead of one per record, most of this loop's time.
    private let nameWindow: UnsafeMutableRawBufferPointer
    /// Which half of `names` holds the current name; the previous
    /// sibling's is in the other, `previousLength` bytes.
    private var currentHalf = 0
    private var previousLength = 0

    /// The parent of the last record checked: its position, whether it is
    /// a directory, its child range.
    private var parent: (position: Int, isDirectory: Bool, children: (first: UInt64, count: UInt64)) = (-1, false, (0, 0))
    private var tiling = IndexRules.ChildTiling()
    /// Positions of the directories that have subdirectories, ascending,
    /// and how many each has (for st_nlink).
    private var parentPositions: [UInt32] = []
    private var subdirectoryCounts: [UInt32] = []
    private var suspectSymlinkPositions: [UInt32] = []
    private var bodies = Bodies()
    private var totalFileBytes: UInt64 = 0
    private var fileCount = 0

    /// Files' bodies so far. encfs-pack lays chunk data out in record
    /// order, so that they do not overlap is one running end, without an
    /// array of ranges (16 bytes per file); any other order falls back to
    /// collecting the ranges after the loop (``distinctBodies()``).
    private struct Bodies {
        var dataEnd: UInt64 = 0
        var inRecordOrder = true
        /// Version 2 only: positions of the bodies seen first, in record
        /// (= data) order, so that a repeat of a shared body is checked
        /// against the body it names with a binary search: 4 bytes per
        /// distinct body, where collecting every file's range for a sort
        /// took 48 (and the sort's scratch) per file.
        var firstSeen: [UInt32] = []
        var stored: UInt64 = 0
        var distinct: UInt64 = 0
        /// Chunk tables checked so far, by offset: files that share a body
        /// share its table, which is checked once.
        var tables = CheckedChunkTables()
    }

    /// Checks the header and prepares to read the records.
    ///
    /// - Throws: `IndexRules.Violation` for a bad header.
    init(pages: IndexPages, layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures) throws {
        guard pages.count >= FlatIndexHeader.size else { throw IndexRules.Violation("bad index magic") }
        let header = try pages.withBytes(at: 0, count: FlatIndexHeader.size) { FlatIndexHeader($0) }
        let count = header.entryCount
        guard header.magicMatches else { throw IndexRules.Violation("bad index magic") }
        guard count >= 1, count <= BundleFormat.maximumEntries else { throw IndexRules.Violation("entry count \(count)") }
        guard header.reservedIsZero else { throw IndexRules.Violation("reserved bytes are not zero") }
        let recordsEnd = UInt64(FlatIndexHeader.size) + UInt64(count) * UInt64(IndexRecord.size)
        guard header.stringsLength <= UInt64(pages.count), recordsEnd + header.stringsLength == UInt64(pages.count) else {
            throw IndexRules.Violation("index length \(pages.count) does not match \(count) entries and \(header.stringsLength) string bytes")
        }
        self.pages = pages
        self.layout = layout
        self.dataLength = dataLength
        self.features = features
        self.header = header
        stringsStart = Int(recordsEnd)
        batch = .allocate(byteCount: Self.recordBatch * IndexRecord.size, alignment: 16)
        names = .allocate(byteCount: 2 * Self.nameCapacity, alignment: 16)
        nameWindow = .allocate(byteCount: Self.recordBatch * Self.nameCapacity, alignment: 16)
    }

    deinit {
        for buffer in [batch, names, nameWindow] {
            SecureBytes.wipe(buffer)
            buffer.deallocate()
        }
    }

    /// Checks every record, then what spans them.
    ///
    /// - Throws: `IndexRules.Violation` naming the first violation,
    ///   `BundleError.corruptIndex` for a bad chunk table, or what reading a
    ///   page throws.
    consuming func run() throws -> Result {
        var batchStart = 0
        while batchStart < header.entryCount {
            let batchCount = min(Self.recordBatch, header.entryCount - batchStart)
            try checkBatch(from: batchStart, count: batchCount)
            batchStart += batchCount
        }
        try tiling.checkComplete(entryCount: header.entryCount)
        if !bodies.inRecordOrder { (bodies.stored, bodies.distinct) = try distinctBodies() }
        return Result(count: header.entryCount, creationTime: header.creationTime, totalFileBytes: totalFileBytes,
                      fileCount: fileCount, parentPositions: parentPositions, subdirectoryCounts: subdirectoryCounts,
                      suspectSymlinkPositions: suspectSymlinkPositions, storedFileBytes: bodies.stored,
                      distinctFileBytes: bodies.distinct)
    }

    private mutating func checkBatch(from batchStart: Int, count batchCount: Int) throws {
        let records = UnsafeMutableRawBufferPointer(rebasing: batch[0..<(batchCount * IndexRecord.size)])
        try pages.copyBytes(at: FlatIndexHeader.size + batchStart * IndexRecord.size, into: records)
        let window = try copyNames(of: UnsafeRawBufferPointer(records))
        for k in 0..<batchCount {
            let r = IndexRecord(in: UnsafeRawBufferPointer(records), at: k)
            try checkRecord(r, position: batchStart + k, batchStart: batchStart, window: window)
        }
    }

    /// The rules of one record, in the order that decides which violation
    /// a record with several is reported by.
    private mutating func checkRecord(_ r: IndexRecord, position: Int, batchStart: Int,
                                      window: (start: Int, count: Int)) throws {
        let kind = try IndexRules.kind(of: r, position: position)
        let hasTable = try IndexRules.checkReserved(r, kind: kind, compressed: features.isCompressed, position: position) == .chunkTable
        try IndexRules.checkMode(r, position: position)
        try IndexRules.checkTime(r, position: position)
        try IndexRules.checkPlacement(r, kind: kind, position: position)
        if position != 0 {
            let name = try checkName(of: r, position: position, window: window)
            try checkParent(of: r, position: position, batchStart: batchStart)
            if UInt64(position) > parent.children.first {
                let previous = names[((1 - currentHalf) * Self.nameCapacity)...].prefix(previousLength)
                try IndexRules.checkNameOrder(UnsafeRawBufferPointer(rebasing: previous), name, position: position)
            }
            currentHalf = 1 - currentHalf
            previousLength = name.count
        }
        switch kind {
        case .directory: try checkDirectory(r, position: position)
        case .file: try checkFile(r, position: position, hasTable: hasTable)
        case .symlink: try checkSymlink(r, position: position)
        }
    }

    /// Copies the record's name into the current half of `names` (from
    /// the batch's window when it lies there) and checks it.
    private mutating func checkName(of r: IndexRecord, position: Int,
                                    window: (start: Int, count: Int)) throws -> UnsafeRawBufferPointer {
        let range = try IndexRules.nameRange(of: r, position: position, stringsLength: header.stringsLength)
        let name = UnsafeMutableRawBufferPointer(rebasing: names[(currentHalf * Self.nameCapacity)...].prefix(range.count))
        if range.lowerBound >= window.start, range.upperBound <= window.start + window.count {
            let from = range.lowerBound - window.start
            name.copyMemory(from: UnsafeRawBufferPointer(rebasing: nameWindow[from..<(from + range.count)]))
        } else {
            try pages.copyBytes(at: stringsStart + range.lowerBound, into: name)
        }
        try IndexRules.checkNameBytes(UnsafeRawBufferPointer(name), position: position)
        return UnsafeRawBufferPointer(name)
    }

    /// The record lies in its parent's child range (the parent is read
    /// once per run of siblings: from the batch, or from the pages).
    private mutating func checkParent(of r: IndexRecord, position: Int, batchStart: Int) throws {
        let parentPosition = r.parent
        if parentPosition != parent.position {
            let fields = { (p: IndexRecord) in (p.kind == .directory, p.children) }
            let (isDirectory, children) = parentPosition >= batchStart
                ? fields(IndexRecord(in: UnsafeRawBufferPointer(batch), at: parentPosition - batchStart))
                : try pages.withBytes(at: FlatIndexHeader.size + parentPosition * IndexRecord.size, count: IndexRecord.size) {
                    fields(IndexRecord($0))
                }
            parent = (parentPosition, isDirectory, children)
        }
        try IndexRules.checkMembership(position, parentIsDirectory: parent.isDirectory, parentChildren: parent.children)
    }

    private mutating func checkDirectory(_ r: IndexRecord, position: Int) throws {
        try IndexRules.checkDirectory(r, position: position, entryCount: header.entryCount)
        try tiling.add(directory: position, children: r.children)
        guard position != 0 else { return }
        // Parents come in ascending order (breadth-first), so the counts
        // stay sorted by position.
        let parent = r.parent
        if parentPositions.last == UInt32(parent) {
            subdirectoryCounts[subdirectoryCounts.count - 1] += 1
        } else {
            try IndexRules.checkBreadthFirst(parent: parent, after: parentPositions.last.map { Int($0) } ?? -1, position: position)
            parentPositions.append(UInt32(parent))
            subdirectoryCounts.append(1)
        }
    }

    private mutating func checkFile(_ r: IndexRecord, position: Int, hasTable: Bool) throws {
        try IndexRules.checkFileSize(r, position: position, layout: layout)
        let (first, size) = r.payload
        let length = hasTable
            ? try bodies.tables.storedLength(ofTableAt: r.chunkTable, plaintextSize: size, position: position, pages: pages,
                                             stringsStart: stringsStart, stringsLength: header.stringsLength, layout: layout)
            : layout.ciphertextSize(forPlaintextSize: size)
        try IndexRules.checkInDataRegion(offset: first, length: length, dataLength: dataLength, position: position)
        if length > 0 {
            if first < bodies.dataEnd {
                // A repeat: legitimate only as an exact copy of an earlier
                // body's record (version 2).
                var repeated = false
                if features.allowsSharedBodies, bodies.inRecordOrder {
                    repeated = try BodyRecord(r).repeats(bodies.firstSeen, pages: pages)
                }
                if !repeated { bodies.inRecordOrder = false }
            } else {
                // In a bundle encfs-pack wrote, a body seen for the first
                // time lies after every earlier one; repeats of shared
                // bodies lie before.
                bodies.stored &+= length
                bodies.distinct &+= size
                if features.allowsSharedBodies { bodies.firstSeen.append(UInt32(position)) }
            }
            bodies.dataEnd = max(bodies.dataEnd, first + length)
        }
        totalFileBytes &+= size
        fileCount += 1
    }

    private mutating func checkSymlink(_ r: IndexRecord, position: Int) throws {
        try IndexRules.checkNoFileID(r, kind: .symlink, position: position)
        let range = try IndexRules.targetRange(of: r, position: position, stringsLength: header.stringsLength)
        let suspect = try pages.withBytes(at: stringsStart + range.lowerBound, count: range.count) { target in
            try IndexRules.checkTargetBytes(target, position: position)
            return SymlinkContainment.isSuspect(target)
        }
        if suspect { suspectSymlinkPositions.append(UInt32(position)) }
    }

    /// Copies the part of the strings region that holds the names of the
    /// records in `records` into `nameWindow`, when it fits; the caller
    /// checks each name's bounds itself and copies a name outside the
    /// window on its own.
    ///
    /// - Returns: where the window starts in the strings region and how
    ///   many bytes it holds (0 when the names do not fit or lie outside
    ///   the region).
    private func copyNames(of records: UnsafeRawBufferPointer) throws -> (start: Int, count: Int) {
        var low = UInt64.max
        var high: UInt64 = 0
        for k in 0..<(records.count / IndexRecord.size) {
            let (offset, length) = IndexRecord(in: records, at: k).name
            guard length > 0 else { continue }
            low = min(low, UInt64(offset))
            high = max(high, UInt64(offset) + UInt64(length))
        }
        guard low < high, high <= header.stringsLength, high - low <= UInt64(nameWindow.count) else { return (0, 0) }
        let count = Int(high - low)
        try pages.copyBytes(at: stringsStart + Int(low), into: UnsafeMutableRawBufferPointer(rebasing: nameWindow[0..<count]))
        return (Int(low), count)
    }

    /// For an index whose data is not in record order (shared bodies, or
    /// an index encfs-pack did not write): the stored bytes of its distinct
    /// bodies and their plaintext bytes (``IndexRules/distinctBodies(_:sharesAllowed:)``).
    /// Runs after every record has been checked, so sizes, offsets and
    /// tables are in range.
    private func distinctBodies() throws -> (stored: UInt64, plaintext: UInt64) {
        var list: [(body: BodyRecord, end: UInt64)] = []
        for position in 0..<header.entryCount {
            let body = try pages.withBytes(at: FlatIndexHeader.size + position * IndexRecord.size, count: IndexRecord.size) {
                let r = IndexRecord($0)
                return r.kind == .file ? BodyRecord(r) : nil
            }
            guard let body else { continue }
            let length = body.flags != 0 ? bodies.tables.storedLength(ofTableAt: body.table) ?? 0
                                         : layout.ciphertextSize(forPlaintextSize: body.size)
            if length > 0 { list.append((body, body.start + length)) }
        }
        return try IndexRules.distinctBodies(&list, sharesAllowed: features.allowsSharedBodies)
    }
}
