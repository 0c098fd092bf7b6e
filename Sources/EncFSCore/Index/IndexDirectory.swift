import CryptCore

/// Page 0 of a paged index (format version 2): what a reader needs before
/// any other page, read and authenticated at open.
///
/// Plaintext layout (little-endian; docs/FORMAT.md, "The paged index"):
/// ```
///  0  8  magic "ENCFSPIX"
///  8  4  page count N, page 0 included (≥ 2: the root needs a record page)
/// 12  4  record pages R (pages 1 … R; pages R+1 … N−1 hold the table stream)
/// 16  4  entry count n (≥ 1)
/// 20  4  suspect symlink count s
/// 24  8  creation time, seconds since the epoch
/// 32  8  file count
/// 40  8  sum of file sizes
/// 48  8  stored bytes of distinct bodies
/// 56  8  plaintext bytes of distinct bodies
/// 64  8  table stream length T
/// 72  12·(N−1)  per page 1 … N−1: sealed length u32, plaintext length u32,
///               first record position u32 (0 for table pages)
///  …  4·s  positions of the symlinks whose targets are absolute or hold
///          "..", ascending
/// ```
/// Page 0 is sealed uncompressed; every other page is where the previous
/// one ends, so the table above is all a reader needs to find any page.
/// The counts and sums are the packer's; `encfs-inspect verify` recomputes
/// them.
struct IndexDirectory: Sendable {
    static let magic: [UInt8] = Array("ENCFSPIX".utf8)
    static let fixedSize = 72
    static let bytesPerPage = 12
    /// Plaintext bytes of a record page or a table page, at most.
    static let pageSize = 64 << 10

    let pageCount: Int
    let recordPageCount: Int
    let entryCount: Int
    let creationTime: Int64
    let fileCount: Int
    let totalFileBytes: UInt64
    let storedFileBytes: UInt64
    let distinctFileBytes: UInt64
    let tableStreamLength: UInt64
    /// Pages 1 … N−1 (index k − 1): sealed and plaintext lengths.
    let sealedLengths: [UInt32]
    let plainLengths: [UInt32]
    /// Record pages only (index k − 1): the first record position.
    let firstPositions: [UInt32]
    /// Where page k starts, from the start of page 1 (index k − 1).
    let pageOffsets: [UInt64]
    let suspectSymlinks: [UInt32]
    /// The plaintext length of the largest page 1 … N−1 (what one cache
    /// slot must hold).
    let largestPageLength: Int

    /// Parses and checks page 0's plaintext against the index region it
    /// came from.
    ///
    /// - Parameter remainingLength: the bytes of the index region after page 0.
    /// - Throws: `BundleError.corruptIndex` naming the first violation.
    init(_ b: UnsafeRawBufferPointer, remainingLength: UInt64) throws {
        func bad(_ why: String) -> BundleError { .corruptIndex("index page 0: \(why)") }
        guard b.count >= Self.fixedSize, b.starts(with: Self.magic) else { throw bad("bad magic") }
        let pages = Int(b.le32(at: 8))
        let records = Int(b.le32(at: 12))
        let entries = Int(b.le32(at: 16))
        let suspects = Int(b.le32(at: 20))
        guard pages >= 2, records >= 1, records < pages else { throw bad("page counts \(pages), \(records)") }
        guard entries >= 1, entries <= BundleFormat.maximumEntries else { throw bad("entry count \(entries)") }
        guard b.count == Self.fixedSize + (pages - 1) * Self.bytesPerPage + 4 * suspects else {
            throw bad("length \(b.count) does not match \(pages) pages and \(suspects) symlinks")
        }
        pageCount = pages
        recordPageCount = records
        entryCount = entries
        creationTime = Int64(bitPattern: b.le64(at: 24))
        fileCount = Int(truncatingIfNeeded: b.le64(at: 32))
        guard b.le64(at: 32) <= UInt64(entries) else { throw bad("file count over the entry count") }
        totalFileBytes = b.le64(at: 40)
        storedFileBytes = b.le64(at: 48)
        distinctFileBytes = b.le64(at: 56)
        tableStreamLength = b.le64(at: 64)
        let tablePages = pages - 1 - records
        let (wholeTablePages, tail) = tableStreamLength.quotientAndRemainder(dividingBy: UInt64(Self.pageSize))
        guard UInt64(tablePages) == wholeTablePages + (tail > 0 ? 1 : 0) else {
            throw bad("\(tablePages) table pages for \(tableStreamLength) table bytes")
        }
        var sealed: [UInt32] = [], plain: [UInt32] = [], firsts: [UInt32] = [], offsets: [UInt64] = []
        sealed.reserveCapacity(pages - 1)
        plain.reserveCapacity(pages - 1)
        firsts.reserveCapacity(records)
        offsets.reserveCapacity(pages - 1)
        var offset: UInt64 = 0
        for k in 1..<pages {
            let at = Self.fixedSize + (k - 1) * Self.bytesPerPage
            let (s, p, first) = (b.le32(at: at), b.le32(at: at + 4), b.le32(at: at + 8))
            guard s > UInt32(AESGCM.tagByteCount), s - UInt32(AESGCM.tagByteCount) <= p else { throw bad("page \(k) has sealed length \(s)") }
            if k <= records {
                guard p >= UInt32(RecordPage.headerSize + IndexEntry.recordSize), p <= UInt32(Self.pageSize) else {
                    throw bad("record page \(k) has length \(p)")
                }
                if k == 1 {
                    guard first == 0 else { throw bad("record page 1 does not start at the root") }
                } else {
                    guard first > firsts[k - 2] else { throw bad("record page \(k) starts before page \(k - 1)") }
                }
                guard first < UInt32(entries) else { throw bad("record page \(k) starts past the last entry") }
                firsts.append(first)
            } else {
                let isLast = k == pages - 1
                let expected = isLast && tail > 0 ? UInt32(tail) : UInt32(Self.pageSize)
                guard p == expected, first == 0 else { throw bad("table page \(k) has length \(p)") }
            }
            sealed.append(s)
            plain.append(p)
            offsets.append(offset)
            offset += UInt64(s)
        }
        guard offset == remainingLength else { throw bad("pages take \(offset) bytes, the index region \(remainingLength)") }
        var symlinks: [UInt32] = []
        symlinks.reserveCapacity(suspects)
        let listAt = Self.fixedSize + (pages - 1) * Self.bytesPerPage
        for i in 0..<suspects {
            let position = b.le32(at: listAt + 4 * i)
            guard position > 0, position < UInt32(entries), symlinks.last.map({ $0 < position }) ?? true else {
                throw bad("suspect symlink list is not ascending inside the index")
            }
            symlinks.append(position)
        }
        sealedLengths = sealed
        plainLengths = plain
        largestPageLength = Int(plain.max() ?? 0)
        firstPositions = firsts
        pageOffsets = offsets
        suspectSymlinks = symlinks
    }

    /// The record page (1 … R) that holds entry `position`.
    func recordPage(holding position: Int) -> Int {
        var low = 0
        var high = firstPositions.count
        while high - low > 1 {
            let mid = (low + high) / 2
            if Int(firstPositions[mid]) <= position { low = mid } else { high = mid }
        }
        return low + 1
    }

    /// The positions record page `page` holds.
    func positions(ofRecordPage page: Int) -> Range<Int> {
        let first = Int(firstPositions[page - 1])
        let end = page < recordPageCount ? Int(firstPositions[page]) : entryCount
        return first..<end
    }

    /// The table page holding table stream byte `offset`, and where in it.
    func tablePage(holding offset: UInt64) -> (page: Int, within: Int) {
        let (page, within) = offset.quotientAndRemainder(dividingBy: UInt64(Self.pageSize))
        return (recordPageCount + 1 + Int(page), Int(within))
    }
}
