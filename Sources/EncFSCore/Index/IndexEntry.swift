/// One record of the index, decoded.
///
/// Record layout (64 bytes, little-endian):
/// ```
///  0 u32  parent record (the root is its own parent)
///  4 u8   kind (1 directory, 2 file, 3 symlink)
///  5 u8   flags: version 2 files, bit 0 = has a chunk table; otherwise 0
///  6 u16  permission bits (07777)
///  8 u32  name offset in the string table
/// 12 u16  name length (the root's is 0)
/// 14 u16  reserved (0)
/// 16 i64  mtime, seconds
/// 24 u32  mtime, nanoseconds (< 10^9)
/// 28 u32  version 2 file with a chunk table: its offset in the string table; otherwise 0
/// 32 u64  size: file bytes / directory child count / symlink target length
/// 40 u64  first: file payload offset / first child record / target offset in the string table
/// 48 16B  file id (files; zero otherwise)
/// ```
public struct IndexEntry: Sendable, Equatable {
    /// Entry kinds.
    public enum Kind: UInt8, Sendable {
        case directory = 1
        case file = 2
        case symlink = 3
    }

    /// Size of one record.
    public static let recordSize = 64

    /// The record's position in the index (inode = position + 1).
    public let position: Int
    /// The parent directory's position.
    public let parent: Int
    public let kind: Kind
    /// Permission bits (07777).
    public let mode: UInt16
    let nameOffset: UInt32
    let nameLength: UInt16
    public let mtimeSeconds: Int64
    public let mtimeNanoseconds: UInt32
    /// File size / child count / target length, by kind.
    public let size: UInt64
    /// Payload offset / first child / target offset, by kind.
    public let first: UInt64
    /// The file id (files; zero otherwise), as stored.
    let fileID: FileID
    /// Record byte 5: bit 0 set when the file's chunks are found through a
    /// chunk table (format version 2, compressed bundles).
    let flags: UInt8
    /// Where the chunk table starts in the string table (when it has one).
    let chunkTableOffset: UInt32

    /// Record flag: the file has a chunk table.
    static let hasChunkTableFlag: UInt8 = 1

    /// Whether the file's chunks are found through a chunk table (compressed
    /// chunks of a version 2 bundle) rather than at fixed offsets.
    public var hasChunkTable: Bool { flags & Self.hasChunkTableFlag != 0 }

    /// A file's 16-byte id, kept in the entry so reading a file needs
    /// nothing else from the index.
    struct FileID: Sendable, Equatable {
        var low: UInt64
        var high: UInt64
    }

    /// Decodes the record at `position` from an index already validated by
    /// ``BundleIndex``.
    init(record r: UnsafeRawBufferPointer, position: Int) {
        self.position = position
        parent = Int(r.le32(at: 0))
        kind = Kind(rawValue: r[4]) ?? .file // validated at load; never taken
        mode = r.le16(at: 6)
        nameOffset = r.le32(at: 8)
        nameLength = r.le16(at: 12)
        mtimeSeconds = Int64(bitPattern: r.le64(at: 16))
        mtimeNanoseconds = r.le32(at: 24)
        size = r.le64(at: 32)
        first = r.le64(at: 40)
        flags = r[5]
        chunkTableOffset = r.le32(at: 28)
        fileID = FileID(low: r.loadUnaligned(fromByteOffset: 48, as: UInt64.self),
                        high: r.loadUnaligned(fromByteOffset: 56, as: UInt64.self))
    }

    /// Calls `body` with the 16 bytes of the file id.
    func withFileID<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var id = fileID
        return try withUnsafeBytes(of: &id) { try body($0) }
    }

    /// Children of a directory, as record positions.
    public var children: Range<Int> {
        kind == .directory ? Int(first)..<(Int(first) + Int(size)) : 0..<0
    }
}
