/// One 64-byte index record, as stored: the only type that knows where its
/// fields lie. A view over bytes it does not own (no copy); the accessors
/// read the field they name and nothing else.
///
/// Record layout (64 bytes, little-endian; docs/FORMAT.md):
/// ```
///  0 u32  parent record (the root is its own parent)
///  4 u8   kind (1 directory, 2 file, 3 symlink)
///  5 u8   flags: version 2 files, bit 0 = has a chunk table, bit 1 = a
///         fragment slice (never both); otherwise 0
///  6 u16  permission bits (07777)
///  8 u32  name offset in the string table
/// 12 u16  name length (the root's is 0)
/// 14 u16  reserved (0)
/// 16 i64  mtime, seconds
/// 24 u32  mtime, nanoseconds (< 10^9)
/// 28 u32  version 2 file with a chunk table: its offset in the string table
///         (a paged index: in the table stream); a fragment slice: its
///         fragment's descriptor in the table stream; otherwise 0
/// 32 u64  directory: child count;  file: plaintext size;  symlink: target length
/// 40 u64  directory: first child;  file: payload offset (a fragment slice:
///         its offset in the fragment's plaintext);  symlink: target offset
/// 48 16B  file id (files; zero otherwise)
/// ```
/// Bytes 32 … 47 mean one thing per kind: read them through the accessor
/// of the record's kind (``children``, ``payload``, ``target``), which the
/// rules (``IndexRules``) check per kind.
struct IndexRecord {
    /// Bytes per record.
    static let size = 64

    /// Where each field starts (the layout above); private to this file.
    private enum Field {
        static let parent = 0, kind = 4, flags = 5, mode = 6, nameOffset = 8, nameLength = 12, reserved = 14
        static let seconds = 16, nanoseconds = 24, chunkTable = 28, count = 32, first = 40, fileID = 48
    }

    private let bytes: UnsafeRawBufferPointer

    /// A view of the record in `bytes` (at least ``size`` bytes; the
    /// caller sliced them out of a buffer it checked the length of).
    @inline(__always)
    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The record at `index` of the records starting at `start` in `buffer`.
    @inline(__always)
    init(in buffer: UnsafeRawBufferPointer, at index: Int, from start: Int = 0) {
        let at = start + index * Self.size
        bytes = UnsafeRawBufferPointer(rebasing: buffer[at..<(at + Self.size)])
    }

    /// The kind byte as stored (for messages).
    @inline(__always) var kindByte: UInt8 { bytes[Field.kind] }
    /// The kind, nil when the byte names none.
    @inline(__always) var kind: IndexEntry.Kind? { IndexEntry.Kind(rawValue: bytes[Field.kind]) }
    /// Record byte 5 as stored.
    @inline(__always) var flags: UInt8 { bytes[Field.flags] }
    /// The parent directory's position.
    @inline(__always) var parent: Int { Int(bytes.le32(at: Field.parent)) }
    /// Permission bits as stored (the rules allow 07777 only).
    @inline(__always) var mode: UInt16 { bytes.le16(at: Field.mode) }
    /// The name's place in the string table.
    @inline(__always) var name: (offset: UInt32, length: UInt16) {
        (bytes.le32(at: Field.nameOffset), bytes.le16(at: Field.nameLength))
    }
    /// Modification time.
    @inline(__always) var mtime: (seconds: Int64, nanoseconds: UInt32) {
        (Int64(bitPattern: bytes.le64(at: Field.seconds)), bytes.le32(at: Field.nanoseconds))
    }
    /// A file's chunk table offset (0 when it has none; the rules say when
    /// it may be other than 0).
    @inline(__always) var chunkTable: UInt32 { bytes.le32(at: Field.chunkTable) }
    /// A directory's children: the first child's position and how many.
    @inline(__always) var children: (first: UInt64, count: UInt64) {
        (bytes.le64(at: Field.first), bytes.le64(at: Field.count))
    }
    /// A file's body: where it starts in the payload, and the plaintext size.
    @inline(__always) var payload: (offset: UInt64, size: UInt64) {
        (bytes.le64(at: Field.first), bytes.le64(at: Field.count))
    }
    /// A symlink's target: its place in the string table.
    @inline(__always) var target: (offset: UInt64, length: UInt64) {
        (bytes.le64(at: Field.first), bytes.le64(at: Field.count))
    }
    /// The 16-byte file id as stored.
    @inline(__always) var fileID: IndexEntry.FileID {
        IndexEntry.FileID(low: bytes.loadUnaligned(fromByteOffset: Field.fileID, as: UInt64.self),
                          high: bytes.loadUnaligned(fromByteOffset: Field.fileID + 8, as: UInt64.self))
    }
    /// Whether the file id is all zero (what directories and symlinks hold).
    var fileIDIsZero: Bool { fileID == IndexEntry.FileID(low: 0, high: 0) }
    /// Whether the reserved u16 is zero.
    var reservedIsZero: Bool { bytes.le16(at: Field.reserved) == 0 }
}

// MARK: - Writing

extension IndexRecord {
    /// What bytes 28 … 63 hold, by kind.
    enum Body {
        case directory(firstChild: UInt64, count: UInt64)
        /// `chunkTable`: the table's offset, nil when the file has none.
        case file(payloadOffset: UInt64, size: UInt64, chunkTable: UInt32?, fileID: [UInt8])
        /// A slice of `size` bytes at `offset` in the fragment whose
        /// descriptor is at `descriptor` and whose id is `fileID`.
        case fragmentSlice(offset: UInt64, size: UInt64, descriptor: UInt32, fileID: [UInt8])
        case symlink(targetOffset: UInt64, length: UInt64)
    }

    /// Appends one record to `out`.
    ///
    /// - Precondition: a file id is 16 bytes.
    static func append(parent: Int, mode: UInt16, name: (offset: UInt32, length: UInt16),
                       mtime: (seconds: Int64, nanoseconds: UInt32), body: Body, to out: inout [UInt8]) {
        let kind: IndexEntry.Kind
        var flags: UInt8 = 0
        var table: UInt32 = 0
        switch body {
        case .directory: kind = .directory
        case .file(_, _, let chunkTable, _):
            kind = .file
            if let chunkTable { (flags, table) = (IndexEntry.hasChunkTableFlag, chunkTable) }
        case .fragmentSlice(_, _, let descriptor, _):
            (kind, flags, table) = (.file, IndexEntry.fragmentSliceFlag, descriptor)
        case .symlink: kind = .symlink
        }
        out.appendLE(UInt32(parent))
        out.append(kind.rawValue)
        out.append(flags)
        out.appendLE(mode)
        out.appendLE(name.offset)
        out.appendLE(name.length)
        out.appendLE(UInt16(0))
        out.appendLE(mtime.seconds)
        out.appendLE(mtime.nanoseconds)
        out.appendLE(table)
        switch body {
        case .directory(let first, let count): appendSpan(count, first, id: nil, to: &out)
        case .file(let offset, let size, _, let id):
            precondition(id.count == 16, "internal error: a file id of \(id.count) bytes")
            appendSpan(size, offset, id: id, to: &out)
        case .fragmentSlice(let offset, let size, _, let id):
            precondition(id.count == 16, "internal error: a fragment id of \(id.count) bytes")
            appendSpan(size, offset, id: id, to: &out)
        case .symlink(let offset, let length): appendSpan(length, offset, id: nil, to: &out)
        }
    }

    private static func appendSpan(_ count: UInt64, _ first: UInt64, id: [UInt8]?, to out: inout [UInt8]) {
        out.appendLE(count)
        out.appendLE(first)
        if let id { out += id } else { out += [UInt8](repeating: 0, count: 16) }
    }

    /// Points the record in `r` at a new name offset (the paged writer moves
    /// names into each page's own strings).
    static func setNameOffset(_ offset: UInt32, in r: inout [UInt8]) { r.storeLE(offset, at: Field.nameOffset) }
    /// Points a symlink's record at a new target offset.
    static func setTargetOffset(_ offset: UInt64, in r: inout [UInt8]) { r.storeLE(offset, at: Field.first) }
    /// Points a file's record at a new chunk table offset (the table stream).
    static func setChunkTable(_ offset: UInt32, in r: inout [UInt8]) { r.storeLE(offset, at: Field.chunkTable) }
}
