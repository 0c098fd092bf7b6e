/// One record of the index, decoded (the bytes are ``IndexRecord``'s).
///
/// What the record's size and first fields mean depends on the kind; read
/// them through the accessor of the entry's kind: ``children`` for a
/// directory, ``fileSize`` and ``payloadOffset`` for a file,
/// ``targetLength`` for a symlink. Each answers empty or 0 for the other
/// kinds.
package struct IndexEntry: Sendable, Equatable {
    /// Entry kinds.
    package enum Kind: UInt8, Sendable {
        case directory = 1
        case file = 2
        case symlink = 3
    }

    /// Size of one record.
    package static let recordSize = IndexRecord.size

    /// The record's position in the index (inode = position + 1).
    package let position: Int
    /// The parent directory's position.
    package let parent: Int
    package let kind: Kind
    /// Permission bits (07777).
    package let mode: UInt16
    let nameOffset: UInt32
    let nameLength: UInt16
    package let mtimeSeconds: Int64
    package let mtimeNanoseconds: UInt32
    /// Record bytes 32 … 39 and 40 … 47 as stored: they mean one thing per
    /// kind (``IndexRecord``), so only the typed accessors below read them.
    @usableFromInline let storedCount: UInt64
    @usableFromInline let storedFirst: UInt64
    /// The file id (files; zero otherwise), as stored.
    let fileID: FileID
    /// Record byte 5: bit 0 set when the file's chunks are found through a
    /// chunk table (format version 2, compressed bundles).
    let flags: UInt8
    /// Where the chunk table starts in the string table (when it has one).
    let chunkTableOffset: UInt32

    /// Record flag: the file has a chunk table.
    static let hasChunkTableFlag: UInt8 = 1
    /// Record flag: the file is a slice of a fragment (format version 2
    /// with fragments): ``chunkTableOffset`` names the fragment's
    /// descriptor, bytes 40 … 47 the slice's offset in the fragment.
    static let fragmentSliceFlag: UInt8 = 2
    /// Never in a record (the record rules refuse it): marks the entry
    /// ``BundleIndex/body(of:)`` makes for a fragment, whose chunks are
    /// fragment units (``BundleIndex/layout(of:)``).
    static let fragmentBodyFlag: UInt8 = 0x80

    /// Whether this is a fragment's own entry (from `BundleIndex.body(of:)`),
    /// cut into fragment units rather than chunks.
    package var isFragmentBody: Bool { flags & Self.fragmentBodyFlag != 0 }

    /// Whether the file is a slice of a shared fragment: read it through
    /// `BundleIndex.body(of:)`, never by its own payload offset.
    package var isFragmentSlice: Bool { flags & Self.fragmentSliceFlag != 0 }

    /// A fragment slice's descriptor offset in the table stream, which
    /// names its fragment (nil for others): tools count fragments by it.
    package var fragmentDescriptor: UInt32? { isFragmentSlice ? chunkTableOffset : nil }

    /// A fragment slice's offset in its fragment's plaintext (0 for others).
    var sliceOffset: UInt64 { isFragmentSlice ? storedFirst : 0 }

    /// Whether the file's chunks are found through a chunk table (compressed
    /// chunks of a version 2 bundle) rather than at fixed offsets.
    package var hasChunkTable: Bool { flags & Self.hasChunkTableFlag != 0 }

    /// A file's 16-byte id, kept in the entry so reading a file needs
    /// nothing else from the index.
    struct FileID: Sendable, Equatable {
        var low: UInt64
        var high: UInt64
    }

    /// Decodes the record at `position` from an index already validated by
    /// ``BundleIndex``.
    @inline(__always)
    init(record r: IndexRecord, position: Int) {
        self.position = position
        parent = r.parent
        kind = r.kind ?? .file // validated at load; never taken
        mode = r.mode
        (nameOffset, nameLength) = r.name
        (mtimeSeconds, mtimeNanoseconds) = r.mtime
        // The same bytes as `r.children`, `r.target`: which they are is
        // the kind's, answered by the accessors.
        (storedFirst, storedCount) = r.payload
        flags = r.flags
        chunkTableOffset = r.chunkTable
        fileID = r.fileID
    }

    /// The fragment that holds the slice `slice`, as a file entry of its
    /// own: its body at `payloadOffset`, `size` plaintext bytes, its chunk
    /// table at `tableOffset`, the slice's id and position (for messages).
    init(fragmentOf slice: IndexEntry, payloadOffset: UInt64, size: UInt64, tableOffset: UInt32) {
        position = slice.position
        parent = slice.parent
        kind = .file
        mode = slice.mode
        (nameOffset, nameLength) = (slice.nameOffset, slice.nameLength)
        (mtimeSeconds, mtimeNanoseconds) = (slice.mtimeSeconds, slice.mtimeNanoseconds)
        (storedFirst, storedCount) = (payloadOffset, size)
        flags = Self.hasChunkTableFlag | Self.fragmentBodyFlag
        chunkTableOffset = tableOffset
        fileID = slice.fileID
    }

    /// Calls `body` with the 16 bytes of the file id.
    func withFileID<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var id = fileID
        return try withUnsafeBytes(of: &id) { try body($0) }
    }

    /// Children of a directory, as record positions (empty for others).
    @inlinable package var children: Range<Int> {
        kind == .directory ? Int(storedFirst)..<(Int(storedFirst) + Int(storedCount)) : 0..<0
    }

    /// A file's plaintext size in bytes (0 for others).
    @inlinable package var fileSize: UInt64 { kind == .file ? storedCount : 0 }

    /// Where a file's body starts in the payload, after the header (0 for
    /// others).
    @inlinable package var payloadOffset: UInt64 { kind == .file ? storedFirst : 0 }

    /// A symlink's target length in bytes (0 for others).
    @inlinable package var targetLength: Int { kind == .symlink ? Int(storedCount) : 0 }

    /// Where a symlink's target lies in the string table (0 for others).
    var targetOffset: Int { kind == .symlink ? Int(storedFirst) : 0 }
}

extension IndexEntry.Kind {
    /// The word messages use.
    var noun: String {
        switch self {
        case .directory: "directory"
        case .file: "file"
        case .symlink: "symlink"
        }
    }
}
