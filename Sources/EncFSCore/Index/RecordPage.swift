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
/// 16  64·m records, laid out as ``IndexEntry`` says, except that name and
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
    static let headerSize = 16

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
        func bad(_ why: String) -> BundleError { .corruptIndex("index page \(page): \(why)") }
        guard b.count >= headerSize else { throw bad("truncated") }
        let m = Int(b.le32(at: 4))
        let stringsLength = Int(b.le32(at: 8))
        guard Int(b.le32(at: 0)) == positions.lowerBound, m == positions.count else {
            throw bad("holds other entries than page 0 says")
        }
        guard b.le32(at: 12) == 0 else { throw bad("reserved bytes are not zero") }
        guard headerSize + m * IndexEntry.recordSize + stringsLength == b.count else { throw bad("length does not match its records") }
        let stringsStart = headerSize + m * IndexEntry.recordSize
        let strings = UnsafeRawBufferPointer(rebasing: b[stringsStart...])
        var previousParent = -1
        var previousName = UnsafeRawBufferPointer(start: nil, count: 0)
        for i in 0..<m {
            let position = positions.lowerBound + i
            let r = UnsafeRawBufferPointer(rebasing: b[(headerSize + i * IndexEntry.recordSize)..<(headerSize + (i + 1) * IndexEntry.recordSize)])
            let name = try check(r, position: position, strings: strings, rules: rules, bad: bad)
            let parent = Int(r.le32(at: 0))
            if position > 0 {
                guard parent >= previousParent else { throw bad("entry \(position) is out of breadth-first order") }
                if parent == previousParent {
                    guard compareBytes(previousName, name) < 0 else {
                        throw bad("entries \(position - 1) and \(position) are not in name order")
                    }
                }
            }
            previousParent = parent
            previousName = name
        }
    }

    /// Checks one record; returns its name (empty for the root).
    private static func check(_ r: UnsafeRawBufferPointer, position: Int, strings: UnsafeRawBufferPointer, rules: Rules,
                              bad: (String) -> BundleError) throws -> UnsafeRawBufferPointer {
        guard let kind = IndexEntry.Kind(rawValue: r[4]) else { throw bad("entry \(position) has unknown kind \(r[4])") }
        let hasTable = kind == .file && rules.features.isCompressed && r[5] == IndexEntry.hasChunkTableFlag
        guard hasTable || (r[5] == 0 && r.le32(at: 28) == 0), r.le16(at: 14) == 0 else {
            throw bad("entry \(position) has non-zero reserved bytes")
        }
        guard r.le16(at: 6) & ~0o7777 == 0 else { throw bad("entry \(position) has invalid mode bits") }
        guard r.le32(at: 24) < 1_000_000_000 else { throw bad("entry \(position) has invalid nanoseconds") }
        let parent = Int(r.le32(at: 0))
        let nameOffset = Int(r.le32(at: 8))
        let nameLength = Int(r.le16(at: 12))
        let size = r.le64(at: 32)
        let first = r.le64(at: 40)
        let idIsZero = r[48..<64].allSatisfy { $0 == 0 }
        var name = UnsafeRawBufferPointer(start: nil, count: 0)
        if position == 0 {
            guard parent == 0, kind == .directory, nameLength == 0, nameOffset == 0 else { throw bad("root entry is malformed") }
        } else {
            guard parent < position else { throw bad("entry \(position) comes before its parent") }
            guard nameLength >= 1, nameLength <= BundleFormat.maximumNameLength, nameOffset <= strings.count - nameLength else {
                throw bad("entry \(position) has an invalid name")
            }
            name = UnsafeRawBufferPointer(rebasing: strings[nameOffset..<(nameOffset + nameLength)])
            guard !name.contains(0), !name.contains(UInt8(ascii: "/")),
                  !(nameLength == 1 && name[0] == UInt8(ascii: ".")),
                  !(nameLength == 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: ".")) else {
                throw bad("entry \(position) has an invalid name")
            }
        }
        switch kind {
        case .directory:
            guard idIsZero else { throw bad("directory \(position) has a file id") }
            guard size <= UInt64(rules.entryCount) else { throw bad("directory \(position) has \(size) children") }
            if size > 0 {
                guard first > UInt64(position), first <= UInt64(rules.entryCount) - size else {
                    throw bad("directory \(position) has an invalid child range")
                }
            } else {
                guard first == 0 else { throw bad("empty directory \(position) has a child offset") }
            }
        case .file:
            guard rules.layout.isValidPlaintextSize(size) else { throw bad("file \(position) is too large") }
            guard first <= rules.dataLength else { throw bad("file \(position) lies outside the data region") }
            if hasTable {
                // The entries are checked as they are read (chunkTableWindow).
                let chunks = rules.layout.chunkCount(forPlaintextSize: size)
                let bytes = chunks.multipliedReportingOverflow(by: UInt64(ChunkTableWindow.entrySize))
                let offset = UInt64(r.le32(at: 28))
                guard chunks > 0, !bytes.overflow, offset <= rules.tableStreamLength,
                      bytes.partialValue <= rules.tableStreamLength - offset else {
                    throw bad("file \(position) has a chunk table outside the table stream")
                }
            } else {
                guard rules.layout.ciphertextSize(forPlaintextSize: size) <= rules.dataLength - first else {
                    throw bad("file \(position) lies outside the data region")
                }
            }
        case .symlink:
            guard idIsZero else { throw bad("symlink \(position) has a file id") }
            guard size >= 1, size <= UInt64(BundleFormat.maximumSymlinkLength), first <= UInt64(strings.count),
                  size <= UInt64(strings.count) - first else { throw bad("symlink \(position) has an invalid target") }
            let target = UnsafeRawBufferPointer(rebasing: strings[Int(first)..<(Int(first) + Int(size))])
            guard !target.contains(0) else { throw bad("symlink \(position) target holds NUL") }
            if SymlinkContainment.isSuspect(target), !isListed(position, in: rules.suspectSymlinks) {
                throw bad("symlink \(position) may lead outside but page 0 does not list it")
            }
        }
        return name
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
