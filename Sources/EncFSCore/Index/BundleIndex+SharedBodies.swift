/// What makes two file records one body: where its chunk data starts, the
/// plaintext size, the file id, the flags and the chunk table. Files of a
/// version 2 bundle may share a body only if all of these are equal; a
/// record that overlaps another in any other way is refused
/// (``IndexRules/distinctBodies(_:sharesAllowed:)``).
struct BodyRecord: Equatable {
    let start: UInt64
    let size: UInt64
    let id: IndexEntry.FileID
    let flags: UInt8
    let table: UInt32

    /// The body fields of a file's record.
    @inline(__always)
    init(_ r: IndexRecord) {
        (start, size) = r.payload
        id = r.fileID
        flags = r.flags
        table = r.chunkTable
    }

    /// The body fields of a decoded file entry.
    init(_ entry: IndexEntry) {
        start = entry.payloadOffset
        size = entry.fileSize
        id = entry.fileID
        flags = entry.flags
        table = entry.chunkTableOffset
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
            let candidate = try pages.withBytes(at: FlatIndexHeader.size + Int(firstSeen[middle]) * IndexRecord.size,
                                                count: IndexRecord.size) { BodyRecord(IndexRecord($0)) }
            if candidate.start == start { return candidate == self }
            if candidate.start < start { low = middle + 1 } else { high = middle }
        }
        return false
    }
}
