import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// The decrypted, validated index: every entry of the bundle in a compact
/// form (fixed-size records plus one string table), kept in wiping memory.
///
/// Plaintext layout (little-endian):
/// ```
///  0  8  magic "ENCFSIDX"
///  8  4  entry count n (≥ 1; record 0 is the root directory)
/// 12  4  reserved (0)
/// 16  8  string table length S
/// 24  8  creation time, seconds since the epoch
/// 32  64·n records (see IndexEntry)
///  …  S bytes: names and symlink targets
/// ```
/// Records are in breadth-first order: the children of each directory are
/// contiguous, sorted by name bytes, and come after their parent, so lookup
/// is a binary search and the tree cannot hold a cycle.
public final class BundleIndex: Sendable {
    static let magic: [UInt8] = Array("ENCFSIDX".utf8)
    static let headerSize = 32

    private let storage: SecureBytes
    /// Number of entries, root included.
    public let count: Int
    /// When the bundle was packed (seconds since the epoch).
    public let creationTime: Int64
    private let recordsOffset = BundleIndex.headerSize
    private let stringsOffset: Int
    /// Sum of all file sizes.
    public let totalFileBytes: UInt64
    /// Number of regular files.
    public let fileCount: Int

    /// Lets `fill` write the index plaintext into the index's own wiping
    /// storage, then validates it against the header it came with.
    ///
    /// The reader decrypts the sealed index in place in that storage, so at
    /// no time are two copies of a large index alive (with 1,000,000 entries
    /// each copy is about 75 MB).
    ///
    /// - Parameters:
    ///   - byteCount: length of the plaintext.
    ///   - layout: the bundle's chunk layout.
    ///   - dataLength: bytes of chunk data before the index (its offset).
    ///   - fill: writes exactly `byteCount` bytes into the buffer it is
    ///     given; if it throws, the buffer is wiped and the error rethrown.
    /// - Throws: what `fill` throws, or `BundleError.corruptIndex` naming
    ///   the first violation.
    public init(byteCount: Int, layout: ChunkLayout, dataLength: UInt64,
                fill: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        var validated: Parsed?
        storage = try SecureBytes(count: byteCount) { (buffer: UnsafeMutableRawBufferPointer) throws in
            try fill(buffer)
            validated = try Self.validate(buffer, layout: layout, dataLength: dataLength)
        }
        guard let parsed = validated else { preconditionFailure("internal error: index storage built without validation") }
        count = parsed.count
        creationTime = parsed.creationTime
        stringsOffset = Self.headerSize + parsed.count * IndexEntry.recordSize
        totalFileBytes = parsed.totalFileBytes
        fileCount = parsed.fileCount
    }

    /// Validates a copy of a decrypted index against the header it came
    /// with (for tools and the fuzzer; the reader uses
    /// ``init(byteCount:layout:dataLength:fill:)``, which needs no copy).
    ///
    /// - Parameters:
    ///   - plaintext: the decrypted index; the caller keeps it.
    ///   - layout: the bundle's chunk layout.
    ///   - dataLength: bytes of chunk data before the index (its offset).
    /// - Throws: `BundleError.corruptIndex` naming the first violation.
    public convenience init(plaintext: SecureBytes, layout: ChunkLayout, dataLength: UInt64) throws {
        try self.init(byteCount: plaintext.count, layout: layout, dataLength: dataLength) { buffer in
            plaintext.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    /// The entry at `position`.
    ///
    /// - Precondition: `position < count`; callers map inodes through
    ///   ``entry(inode:)``, which checks.
    public func entry(at position: Int) -> IndexEntry {
        precondition(position >= 0 && position < count, "internal error: index position \(position) out of range")
        return storage.withUnsafeBytes { b in
            let start = recordsOffset + position * IndexEntry.recordSize
            return IndexEntry(record: UnsafeRawBufferPointer(rebasing: b[start..<(start + IndexEntry.recordSize)]), position: position)
        }
    }

    /// The entry for a FUSE inode number (position + 1), or nil.
    public func entry(inode: UInt64) -> IndexEntry? {
        guard inode >= 1, inode <= UInt64(count) else { return nil }
        return entry(at: Int(inode - 1))
    }

    /// The root directory.
    public var root: IndexEntry { entry(at: 0) }

    /// Calls `body` with the name bytes of `entry` (valid during the call).
    public func withName<R>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { b in
            let start = stringsOffset + Int(entry.nameOffset)
            return try body(UnsafeRawBufferPointer(rebasing: b[start..<(start + Int(entry.nameLength))]))
        }
    }

    /// The name bytes of `entry` as a new array (not for hot paths).
    public func name(of entry: IndexEntry) -> [UInt8] { withName(of: entry) { Array($0) } }

    /// Calls `body` with the target bytes of a symlink.
    public func withSymlinkTarget<R>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(entry.kind == .symlink, "internal error: target of a non-symlink")
        return try storage.withUnsafeBytes { b in
            let start = stringsOffset + Int(entry.first)
            return try body(UnsafeRawBufferPointer(rebasing: b[start..<(start + Int(entry.size))]))
        }
    }

    /// The file id of a file entry.
    public func withFileID<R>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { b in
            let start = recordsOffset + entry.position * IndexEntry.recordSize + 48
            return try body(UnsafeRawBufferPointer(rebasing: b[start..<(start + BundleFormat.idSize)]))
        }
    }

    /// Subdirectories of a directory entry (for st_nlink); 0 for others.
    ///
    /// Counted at load into the directory's record (see
    /// ``IndexEntry/subdirectoryCountOffset``), so no array per entry.
    public func subdirectoryCount(of entry: IndexEntry) -> Int {
        guard entry.kind == .directory else { return 0 }
        return storage.withUnsafeBytes { b in
            Int(b.le32(at: recordsOffset + entry.position * IndexEntry.recordSize + IndexEntry.subdirectoryCountOffset))
        }
    }

    /// Finds the child of `directory` called `name` by binary search.
    public func lookup(_ name: UnsafeRawBufferPointer, in directory: IndexEntry) -> IndexEntry? {
        guard directory.kind == .directory else { return nil }
        var low = directory.children.lowerBound
        var high = directory.children.upperBound
        while low < high {
            let mid = (low + high) / 2
            let candidate = entry(at: mid)
            let order = withName(of: candidate) { compareBytes($0, name) }
            if order == 0 { return candidate }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    /// Resolves a '/'-separated path relative to the root. Empty components
    /// and "." are skipped, ".." goes up (the root is its own parent).
    ///
    /// Symlinks in the middle of the path are followed as a shell would, as
    /// long as their targets are relative (an absolute target points outside
    /// the bundle); the last component is followed only when
    /// `followingLast` is set. At most 40 links are followed.
    ///
    /// - Throws: `BundleError.notFound`, `.notADirectory`, `.io(ELOOP)`, or
    ///   `.rejected` for an absolute symlink target.
    public func resolve(path: [UInt8], followingLast: Bool = false) throws -> IndexEntry {
        var pending = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init).reversed() as [[UInt8]]
        var current = root
        var hops = 0
        while let component = pending.popLast() {
            // "f/." and "f/.." with f a file are not directories, as in POSIX.
            guard current.kind == .directory else { throw BundleError.notADirectory }
            if component == [UInt8(ascii: ".")] { continue }
            if component == [UInt8(ascii: "."), UInt8(ascii: ".")] {
                current = entry(at: current.parent)
                continue
            }
            guard let next = component.withUnsafeBytes({ lookup($0, in: current) }) else { throw BundleError.notFound }
            if next.kind == .symlink, !pending.isEmpty || followingLast {
                hops += 1
                guard hops <= 40 else { throw BundleError.io(errno: ELOOP, operation: "follow symlink", path: path) }
                let target = withSymlinkTarget(of: next) { Array($0) }
                guard target.first != UInt8(ascii: "/") else { throw BundleError.rejected("symlink points outside the bundle") }
                // Continue from the link's directory with the target's components.
                let parts = target.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
                pending.append(contentsOf: parts.reversed())
                continue
            }
            current = next
        }
        return current
    }

    /// The path of `entry` from the root, '/'-separated, without a leading '/'.
    public func path(of entry: IndexEntry) -> [UInt8] {
        var parts: [[UInt8]] = []
        var current = entry
        while current.position != 0 {
            parts.append(name(of: current))
            current = self.entry(at: current.parent)
        }
        return Array(parts.reversed().joined(separator: [UInt8(ascii: "/")]))
    }

    // MARK: - Validation

    private struct Parsed {
        var count: Int
        var creationTime: Int64
        var totalFileBytes: UInt64
        var fileCount: Int
    }

    /// Checks every rule of the format on the plaintext in `storage`, and
    /// writes each directory's subdirectory count into its record's reserved
    /// bytes (``IndexEntry/subdirectoryCountOffset``) once those have been
    /// checked to be zero: the only write, into the index's own storage.
    private static func validate(_ storage: UnsafeMutableRawBufferPointer, layout: ChunkLayout, dataLength: UInt64) throws -> Parsed {
        let b = UnsafeRawBufferPointer(storage)
        func bad(_ why: String) -> BundleError { .corruptIndex(why) }
        guard b.count >= headerSize, b.starts(with: magic) else { throw bad("bad index magic") }
        let count = Int(b.le32(at: 8))
        guard count >= 1, count <= BundleFormat.maximumEntries else { throw bad("entry count \(count)") }
        guard b.le32(at: 12) == 0 else { throw bad("reserved bytes are not zero") }
        let stringsLength = b.le64(at: 16)
        let creationTime = Int64(bitPattern: b.le64(at: 24))
        let recordsEnd = UInt64(headerSize) + UInt64(count) * UInt64(IndexEntry.recordSize)
        guard stringsLength <= UInt64(b.count), recordsEnd + stringsLength == UInt64(b.count) else {
            throw bad("index length \(b.count) does not match \(count) entries and \(stringsLength) string bytes")
        }
        let strings = UnsafeRawBufferPointer(rebasing: b[Int(recordsEnd)...])
        // Files' chunk data must not overlap. encfs-pack lays it out in
        // record order, so the check is one running end, without an array
        // of ranges (16 bytes per file); any other order falls back to
        // sorting the ranges after the loop.
        var dataEnd: UInt64 = 0
        var dataInRecordOrder = true
        var totalFileBytes: UInt64 = 0
        var fileCount = 0
        var childTotal = 0
        var nextChild = 1 // breadth-first: child ranges tile 1 ..< count in order
        for position in 0..<count {
            let start = headerSize + position * IndexEntry.recordSize
            let r = UnsafeRawBufferPointer(rebasing: b[start..<(start + IndexEntry.recordSize)])
            guard let kind = IndexEntry.Kind(rawValue: r[4]) else { throw bad("entry \(position) has unknown kind \(r[4])") }
            guard r[5] == 0, r.le16(at: 14) == 0, r.le32(at: 28) == 0 else { throw bad("entry \(position) has non-zero reserved bytes") }
            guard r.le16(at: 6) & ~0o7777 == 0 else { throw bad("entry \(position) has invalid mode bits") }
            guard r.le32(at: 24) < 1_000_000_000 else { throw bad("entry \(position) has invalid nanoseconds") }
            let parent = Int(r.le32(at: 0))
            let nameOffset = UInt64(r.le32(at: 8))
            let nameLength = Int(r.le16(at: 12))
            let size = r.le64(at: 32)
            let first = r.le64(at: 40)
            let idIsZero = r[48..<64].allSatisfy { $0 == 0 }
            if position == 0 {
                guard parent == 0, kind == .directory, nameLength == 0, nameOffset == 0 else { throw bad("root entry is malformed") }
            } else {
                guard parent < position else { throw bad("entry \(position) comes before its parent") }
                guard nameLength >= 1, nameLength <= BundleFormat.maximumNameLength,
                      nameOffset + UInt64(nameLength) <= stringsLength else { throw bad("entry \(position) has an invalid name") }
                let name = UnsafeRawBufferPointer(rebasing: strings[Int(nameOffset)..<(Int(nameOffset) + nameLength)])
                guard !name.contains(0), !name.contains(UInt8(ascii: "/")),
                      !(nameLength == 1 && name[0] == UInt8(ascii: ".")),
                      !(nameLength == 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: ".")) else {
                    throw bad("entry \(position) has an invalid name")
                }
                let parentRecord = UnsafeRawBufferPointer(rebasing: b[(headerSize + parent * IndexEntry.recordSize)...])
                let parentFirst = parentRecord.le64(at: 40)
                let parentSize = parentRecord.le64(at: 32)
                guard parentRecord[4] == IndexEntry.Kind.directory.rawValue,
                      UInt64(position) >= parentFirst, UInt64(position) - parentFirst < parentSize else {
                    throw bad("entry \(position) is not among its parent's children")
                }
                if UInt64(position) > parentFirst {
                    let previous = UnsafeRawBufferPointer(rebasing: b[(start - IndexEntry.recordSize)..<start])
                    let prevName = UnsafeRawBufferPointer(rebasing: strings[Int(previous.le32(at: 8))..<(Int(previous.le32(at: 8)) + Int(previous.le16(at: 12)))])
                    guard compareBytes(prevName, name) < 0 else { throw bad("entries \(position - 1) and \(position) are not in name order") }
                }
            }
            switch kind {
            case .directory:
                guard idIsZero else { throw bad("directory \(position) has a file id") }
                guard size <= UInt64(count) else { throw bad("directory \(position) has \(size) children") }
                if size > 0 {
                    guard first == UInt64(nextChild), first + size <= UInt64(count) else {
                        throw bad("directory \(position) has an invalid child range")
                    }
                    nextChild += Int(size)
                } else {
                    guard first == 0 else { throw bad("empty directory \(position) has a child offset") }
                }
                childTotal += Int(size)
                if position != 0 {
                    // The parent's record was checked (parent < position):
                    // its reserved bytes started at zero. At most count − 1
                    // increments in all, so no overflow.
                    let at = headerSize + parent * IndexEntry.recordSize + IndexEntry.subdirectoryCountOffset
                    storage.storeBytes(of: (b.le32(at: at) + 1).littleEndian, toByteOffset: at, as: UInt32.self)
                }
            case .file:
                guard layout.isValidPlaintextSize(size) else { throw bad("file \(position) is too large") }
                let length = layout.ciphertextSize(forPlaintextSize: size)
                guard first <= dataLength, length <= dataLength - first else {
                    throw bad("file \(position) lies outside the data region")
                }
                if length > 0 {
                    if first < dataEnd { dataInRecordOrder = false }
                    dataEnd = max(dataEnd, first + length)
                }
                totalFileBytes &+= size
                fileCount += 1
            case .symlink:
                guard idIsZero else { throw bad("symlink \(position) has a file id") }
                guard size >= 1, size <= UInt64(BundleFormat.maximumSymlinkLength), first <= stringsLength,
                      size <= stringsLength - first else { throw bad("symlink \(position) has an invalid target") }
                guard !strings[Int(first)..<Int(first + size)].contains(0) else { throw bad("symlink \(position) target holds NUL") }
            }
        }
        guard childTotal == count - 1, nextChild == count else { throw bad("directory child ranges do not cover every entry") }
        if !dataInRecordOrder, dataRangesOverlap(b, count: count, layout: layout) { throw bad("file data ranges overlap") }
        return Parsed(count: count, creationTime: creationTime, totalFileBytes: totalFileBytes, fileCount: fileCount)
    }
}

extension BundleIndex {
    /// Whether any two files' chunk data overlap, for an index whose data
    /// is not in record order (never written by encfs-pack). Runs after
    /// every record has been checked, so sizes and offsets are in range.
    fileprivate static func dataRangesOverlap(_ b: UnsafeRawBufferPointer, count: Int, layout: ChunkLayout) -> Bool {
        var ranges: [(start: UInt64, end: UInt64)] = []
        for position in 0..<count {
            let r = UnsafeRawBufferPointer(rebasing: b[(headerSize + position * IndexEntry.recordSize)...])
            guard r[4] == IndexEntry.Kind.file.rawValue else { continue }
            let length = layout.ciphertextSize(forPlaintextSize: r.le64(at: 32))
            if length > 0 { ranges.append((r.le64(at: 40), r.le64(at: 40) + length)) }
        }
        ranges.sort { $0.start < $1.start }
        return ranges.indices.dropFirst().contains { ranges[$0].start < ranges[$0 - 1].end }
    }
}

/// memcmp order, shorter prefix first: the order names are sorted in.
func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
        let c = memcmp(pa, pb, n)
        if c != 0 { return Int(c) }
    }
    return a.count - b.count
}
