/// What makes two file records one body: where its chunk data starts, the
/// plaintext size, the file id, the flags and the chunk table. Files of a
/// version 2 bundle may share a body only if all of these are equal; a
/// record that overlaps another in any other way is refused.
struct BodyRecord: Equatable {
    let start: UInt64
    let size: UInt64
    let idLow: UInt64
    let idHigh: UInt64
    let flags: UInt8
    let table: UInt32

    /// The body fields of the index record `r` (IndexEntry.recordSize bytes).
    init(_ r: UnsafeRawBufferPointer) {
        start = r.le64(at: 40)
        size = r.le64(at: 32)
        idLow = r.loadUnaligned(fromByteOffset: 48, as: UInt64.self)
        idHigh = r.loadUnaligned(fromByteOffset: 56, as: UInt64.self)
        flags = r[5]
        table = r.le32(at: 28)
    }

    /// Whether this record repeats, field for field, one of the bodies at
    /// `firstSeen` (record positions whose starts increase, as encfs-pack
    /// lays bodies out): a binary search by start, reading records through
    /// the index pages.
    ///
    /// - Throws: what reading the index pages throws.
    func repeats(_ firstSeen: [UInt32], pages: IndexPages) throws -> Bool {
        var low = 0
        var high = firstSeen.count
        while low < high {
            let middle = low + (high - low) / 2
            let candidate = try pages.withBytes(at: BundleIndex.headerSize + Int(firstSeen[middle]) * IndexEntry.recordSize,
                                                count: IndexEntry.recordSize) { BodyRecord($0) }
            if candidate.start == start { return candidate == self }
            if candidate.start < start { low = middle + 1 } else { high = middle }
        }
        return false
    }
}
