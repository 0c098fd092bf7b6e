/// One record page of a paged index: a run of consecutive entries with
/// their names and symlink targets, and the checks a reader makes on it
/// each time it loads it (what can be checked from the page alone).
///
/// Plaintext layout (little-endian; docs/FORMAT.md, "The paged index"):
/// ```
///  0  4  first position (as page 0 says)
///  4  4  record count m (as page 0 says: up to the next page's first)
///  8  4  strings length S
/// 12  4  reserved (0)
/// 16  64·m records, laid out as ``IndexRecord`` says, except that name and
///        symlink target offsets count from this page's strings and a
///        file's chunk table offset counts from the table stream
/// 16+64m  S bytes: names and symlink targets
/// ```
/// Everything that spans pages (directory child ranges tiling the index,
/// each entry inside its parent's range, name order across a page break,
/// file bodies not overlapping, the sums in page 0) is checked by
/// `encfs-inspect verify` (``BundleIndex/checkPagedIndexWhole()``); a
/// reader checks what it uses when it uses it (a parent's range when it
/// walks up, a chunk table's entries when it reads them).
package enum RecordPage {
    static let headerSize = RecordPageHeader.size

    /// What a record page is checked against: the bundle's header and page 0.
    struct Rules: Sendable {
        let layout: ChunkLayout
        /// Bytes of chunk data before the index (its offset).
        let dataLength: UInt64
        let features: BundleFeatures
        let entryCount: Int
        let tableStreamLength: UInt64
        /// Page 0's list of symlinks that may lead outside, ascending.
        let suspectSymlinks: [UInt32]
    }

    /// Checks a record page's plaintext.
    ///
    /// - Parameters:
    ///   - b: the plaintext, exactly as long as page 0 says.
    ///   - page: its page number (for messages).
    ///   - positions: the entries page 0 says it holds.
    /// - Throws: `BundleError.corruptIndex` naming the page and the first violation.
    static func validate(_ b: UnsafeRawBufferPointer, page: Int, positions: Range<Int>, rules: Rules) throws {
        do throws(IndexRules.Violation) {
            try checkPage(b, positions: positions, rules: rules)
        } catch {
            throw BundleError.corruptIndex("index page \(page): \(error.why)")
        }
    }

    /// The page's header, then each record on its own
    /// (``check(_:position:strings:rules:)``), then breadth-first and name
    /// order between neighbours.
    private static func checkPage(_ b: UnsafeRawBufferPointer, positions: Range<Int>,
                                  rules: Rules) throws(IndexRules.Violation) {
        guard b.count >= headerSize else { throw IndexRules.Violation("truncated") }
        let header = RecordPageHeader(b)
        let m = header.recordCount
        guard header.firstPosition == positions.lowerBound, m == positions.count else {
            throw IndexRules.Violation("holds other entries than page 0 says")
        }
        guard header.reservedIsZero else { throw IndexRules.Violation("reserved bytes are not zero") }
        let stringsStart = headerSize + m * IndexRecord.size
        guard stringsStart + header.stringsLength == b.count else { throw IndexRules.Violation("length does not match its records") }
        let strings = UnsafeRawBufferPointer(rebasing: b[stringsStart...])
        var previousParent = -1
        var previousName = UnsafeRawBufferPointer(start: nil, count: 0)
        for i in 0..<m {
            let position = positions.lowerBound + i
            let r = IndexRecord(in: b, at: i, from: headerSize)
            let name = try check(r, position: position, strings: strings, rules: rules)
            if position > 0 {
                try IndexRules.checkBreadthFirst(parent: r.parent, after: previousParent, position: position)
                if r.parent == previousParent { try IndexRules.checkNameOrder(previousName, name, position: position) }
            }
            previousParent = r.parent
            previousName = name
        }
    }

    /// Checks one record against what the page alone can show; returns its
    /// name (empty for the root).
    private static func check(_ r: IndexRecord, position: Int, strings: UnsafeRawBufferPointer,
                              rules: Rules) throws(IndexRules.Violation) -> UnsafeRawBufferPointer {
        let kind = try IndexRules.kind(of: r, position: position)
        let form = try IndexRules.checkReserved(r, kind: kind, compressed: rules.features.isCompressed,
                                               fragments: rules.features.hasFragments, position: position)
        try IndexRules.checkMode(r, position: position)
        try IndexRules.checkTime(r, position: position)
        try IndexRules.checkPlacement(r, kind: kind, position: position)
        var name = UnsafeRawBufferPointer(start: nil, count: 0)
        if position != 0 {
            name = UnsafeRawBufferPointer(rebasing: strings[try IndexRules.nameRange(of: r, position: position,
                                                                                  stringsLength: UInt64(strings.count))])
            try IndexRules.checkNameBytes(name, position: position)
        }
        switch kind {
        case .directory:
            try IndexRules.checkDirectory(r, position: position, entryCount: rules.entryCount)
        case .file:
            try checkFile(r, position: position, form: form, rules: rules)
        case .symlink:
            try IndexRules.checkNoFileID(r, kind: .symlink, position: position)
            let target = UnsafeRawBufferPointer(rebasing: strings[try IndexRules.targetRange(of: r, position: position,
                                                                                          stringsLength: UInt64(strings.count))])
            try IndexRules.checkTargetBytes(target, position: position)
            if SymlinkContainment.isSuspect(target), !isListed(position, in: rules.suspectSymlinks) {
                throw IndexRules.Violation("symlink \(position) may lead outside but page 0 does not list it")
            }
        }
        return name
    }

    /// A file's size, and its body's start in the data region; with a
    /// chunk table, the table inside the table stream (its entries are
    /// checked as they are read: `BundleIndex.chunkTableWindow`), without,
    /// the whole body inside the data region; a fragment slice, its
    /// descriptor's head inside the table stream (the descriptor is checked
    /// when it is read: `BundleIndex.body(of:)`).
    private static func checkFile(_ r: IndexRecord, position: Int, form: IndexRules.BodyForm,
                                  rules: Rules) throws(IndexRules.Violation) {
        try IndexRules.checkFileSize(r, position: position, layout: rules.layout)
        let (first, size) = r.payload
        if form == .fragmentSlice {
            try IndexRules.checkFragmentSlice(r, position: position, tableStreamLength: rules.tableStreamLength)
            return
        }
        try IndexRules.checkInDataRegion(offset: first, length: 0, dataLength: rules.dataLength, position: position)
        if form == .chunkTable {
            let chunks = rules.layout.chunkCount(forPlaintextSize: size)
            guard chunks > 0, IndexRules.chunkTableFits(offset: r.chunkTable, chunks: chunks, in: rules.tableStreamLength) else {
                throw IndexRules.Violation("file \(position) has a chunk table outside the table stream")
            }
        } else {
            try IndexRules.checkInDataRegion(offset: first, length: rules.layout.ciphertextSize(forPlaintextSize: size),
                                             dataLength: rules.dataLength, position: position)
        }
    }

    /// Binary search of an ascending list.
    static func isListed(_ position: Int, in list: [UInt32]) -> Bool {
        var low = 0
        var high = list.count
        while low < high {
            let mid = (low + high) / 2
            if Int(list[mid]) < position { low = mid + 1 } else { high = mid }
        }
        return low < list.count && Int(list[low]) == position
    }
}
