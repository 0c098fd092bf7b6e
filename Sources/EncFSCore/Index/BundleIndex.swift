import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// The validated index: every entry of the bundle in a compact form
/// (fixed-size records plus one string table). The plaintext is held by
/// `IndexPages`: in wiping memory, or, for an opened bundle, sealed in the
/// file and decrypted a page at a time into a bounded, locked cache.
///
/// Plaintext layout (little-endian):
/// ```
///  0  8  magic "ENCFSIDX"
///  8  4  entry count n (≥ 1; record 0 is the root directory)
/// 12  4  reserved (0)
/// 16  8  string table length S
/// 24  8  creation time, seconds since the epoch
/// 32  64·n records (see IndexRecord)
///  …  S bytes: names and symlink targets
/// ```
/// Records are in breadth-first order: the children of each directory are
/// contiguous, sorted by name bytes, and come after their parent, so lookup
/// is a binary search and the tree cannot hold a cycle.
package final class BundleIndex: Sendable {
    static let magic = FlatIndexHeader.magic
    static let headerSize = FlatIndexHeader.size

    /// Where the records live: a flat index's plaintext (in memory, or
    /// paged in from the bundle, see `IndexPages`), or a paged index's
    /// store (format version 2, see `PagedIndexStore`).
    let storage: Storage

    /// The two ways an index is stored.
    enum Storage: Sendable {
        /// One sealed message: records and string table at fixed offsets.
        case flat(IndexPages)
        /// Pages sealed one by one, each opened and checked at first use.
        case paged(PagedIndexStore)
    }

    /// The flat index's plaintext (nil for a paged index).
    var flatPages: IndexPages? {
        if case .flat(let pages) = storage { return pages }
        return nil
    }

    /// Whether the index is paged (format version 2, docs/FORMAT.md).
    package var isPaged: Bool { flatPages == nil }
    /// Number of entries, root included.
    package let count: Int
    /// When the bundle was packed (seconds since the epoch).
    package let creationTime: Int64
    private let recordsOffset = BundleIndex.headerSize
    let stringsOffset: Int
    /// The bundle's chunk layout.
    package let layout: ChunkLayout
    /// The layout fragments are cut into: units of the header's fragment
    /// unit, or ``layout`` (``BundleFeatures/fragmentLayout(files:)``).
    package let fragmentLayout: ChunkLayout
    /// Sum of all file sizes.
    package let totalFileBytes: UInt64
    /// Number of regular files.
    package let fileCount: Int
    /// Positions of the directories that have subdirectories, ascending,
    /// and how many each has (for st_nlink): counted at load, 8 bytes per
    /// such directory instead of anything per entry.
    private let parentPositions: [UInt32]
    private let subdirectoryCounts: [UInt32]
    /// Positions of the symlinks whose targets are absolute or hold "..",
    /// ascending: the only ones that can lead outside the bundle
    /// (`SymlinkContainment`), found at load, usually none.
    let suspectSymlinkPositions: [UInt32]
    /// The header's format version and compression, which say what records
    /// may hold (chunk tables, shared bodies).
    package let features: BundleFeatures
    /// Sum of the stored sizes of distinct file bodies (shared bodies
    /// counted once): what the files take in the payload.
    package let storedFileBytes: UInt64
    /// Sum of the plaintext sizes of distinct file bodies: what
    /// ``totalFileBytes`` would be without deduplication's repeats.
    package let distinctFileBytes: UInt64
    /// Bytes of chunk data before the index (its offset): where every
    /// file body must end.
    let dataLength: UInt64

    /// Validates index plaintext against the header it came with.
    ///
    /// - Parameters:
    ///   - pages: the plaintext.
    ///   - layout: the bundle's chunk layout.
    ///   - dataLength: bytes of chunk data before the index (its offset).
    ///   - features: the header's version and compression.
    /// - Throws: `BundleError.corruptIndex` naming the first violation, or
    ///   what reading a page throws.
    init(pages: IndexPages, layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures = .version1) throws {
        let parsed: FlatIndexValidator.Result
        do {
            parsed = try FlatIndexValidator(pages: pages, layout: layout, dataLength: dataLength, features: features).run()
        } catch let violation as IndexRules.Violation {
            throw BundleError.corruptIndex(violation.why)
        }
        storage = .flat(pages)
        self.dataLength = dataLength
        self.layout = layout
        fragmentLayout = features.fragmentLayout(files: layout)
        self.features = features
        storedFileBytes = parsed.storedFileBytes
        distinctFileBytes = parsed.distinctFileBytes
        count = parsed.count
        creationTime = parsed.creationTime
        stringsOffset = Self.headerSize + parsed.count * IndexEntry.recordSize
        totalFileBytes = parsed.totalFileBytes
        fileCount = parsed.fileCount
        parentPositions = parsed.parentPositions
        subdirectoryCounts = parsed.subdirectoryCounts
        suspectSymlinkPositions = parsed.suspectSymlinkPositions
    }

    /// A paged index whose page 0 has been opened: nothing else is read
    /// until it is used (see `PagedIndexStore`). The counts and sums are
    /// page 0's; `encfs-inspect verify` checks them
    /// (``checkPagedIndexWhole()``).
    init(paged store: PagedIndexStore, layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures) {
        let directory = store.directory
        storage = .paged(store)
        self.layout = layout
        fragmentLayout = features.fragmentLayout(files: layout)
        self.dataLength = dataLength
        self.features = features
        count = directory.entryCount
        creationTime = directory.creationTime
        stringsOffset = 0
        totalFileBytes = directory.totalFileBytes
        fileCount = directory.fileCount
        storedFileBytes = directory.storedFileBytes
        distinctFileBytes = directory.distinctFileBytes
        parentPositions = []
        subdirectoryCounts = []
        suspectSymlinkPositions = directory.suspectSymlinks
    }

    /// Lets `fill` write the index plaintext into wiping storage, then
    /// validates it against the header it came with (all of it stays in
    /// memory: for tools and tests; a mounted bundle pages it).
    ///
    /// - Parameters:
    ///   - byteCount: length of the plaintext.
    ///   - layout: the bundle's chunk layout.
    ///   - dataLength: bytes of chunk data before the index (its offset).
    ///   - fill: writes exactly `byteCount` bytes into the buffer it is
    ///     given; if it throws, the buffer is wiped and the error rethrown.
    /// - Throws: what `fill` throws, or `BundleError.corruptIndex` naming
    ///   the first violation.
    package convenience init(byteCount: Int, layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures = .version1,
                            fill: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        let storage = try SecureBytes(count: byteCount) { (buffer: UnsafeMutableRawBufferPointer) throws in try fill(buffer) }
        try self.init(pages: IndexPages(resident: storage), layout: layout, dataLength: dataLength, features: features)
    }

    /// Validates a decrypted index held in memory (for tools and the
    /// fuzzer). The index keeps a reference to `plaintext`, no copy.
    ///
    /// - Parameters:
    ///   - plaintext: the decrypted index.
    ///   - layout: the bundle's chunk layout.
    ///   - dataLength: bytes of chunk data before the index (its offset).
    /// - Throws: `BundleError.corruptIndex` naming the first violation.
    package convenience init(plaintext: SecureBytes, layout: ChunkLayout, dataLength: UInt64,
                            features: BundleFeatures = .version1) throws {
        try self.init(pages: IndexPages(resident: plaintext), layout: layout, dataLength: dataLength, features: features)
    }

    /// The entry at `position`.
    ///
    /// - Precondition: `position < count`; callers map inodes through
    ///   ``entry(inode:)``, which checks.
    /// - Throws: what reading a page of a paged index throws
    ///   (`BundleError.corruptIndex` when the bundle changed since it was
    ///   verified, `.io`).
    package func entry(at position: Int) throws -> IndexEntry {
        precondition(position >= 0 && position < count, "internal error: index position \(position) out of range")
        switch storage {
        case .flat(let pages):
            return try pages.withBytes(at: recordsOffset + position * IndexEntry.recordSize, count: IndexEntry.recordSize) {
                IndexEntry(record: IndexRecord($0), position: position)
            }
        case .paged(let store):
            return try store.withRecord(at: position) { IndexEntry(record: $0, position: position) }
        }
    }

    /// Calls `body` with `count` bytes of the string table at `offset`: a
    /// name or symlink target of `entry` (a paged index keeps them in the
    /// entry's page).
    private func withStrings<R: Sendable>(of entry: IndexEntry, offset: Int, count: Int,
                                          _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        switch storage {
        case .flat(let pages): return try pages.withBytes(at: stringsOffset + offset, count: count, body)
        case .paged(let store): return try store.withStrings(ofEntryAt: entry.position, offset: offset, count: count, body)
        }
    }

    /// The entry for a FUSE inode number (position + 1), or nil.
    ///
    /// - Throws: as ``entry(at:)``.
    package func entry(inode: UInt64) throws -> IndexEntry? {
        guard inode >= 1, inode <= UInt64(count) else { return nil }
        return try entry(at: Int(inode - 1))
    }

    /// The root directory.
    package var root: IndexEntry {
        get throws { try entry(at: 0) }
    }

    /// Calls `body` with the name bytes of `entry` (valid during the call;
    /// for a paged index `body` runs under its lock and must not call back
    /// into the index).
    package func withName<R: Sendable>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withStrings(of: entry, offset: Int(entry.nameOffset), count: Int(entry.nameLength), body)
    }

    /// The name bytes of `entry` as a new array (not for hot paths).
    package func name(of entry: IndexEntry) throws -> [UInt8] { try withName(of: entry) { Array($0) } }

    /// Copies the name of `entry` into `buffer` (at least 255 bytes).
    ///
    /// - Returns: the name's length.
    package func copyName(of entry: IndexEntry, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let length = Int(entry.nameLength)
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
        switch storage {
        case .flat(let pages):
            try pages.copyBytes(at: stringsOffset + Int(entry.nameOffset), into: target)
        case .paged(let store):
            try store.withStrings(ofEntryAt: entry.position, offset: Int(entry.nameOffset), count: length) { target.copyMemory(from: $0) }
        }
        return length
    }

    /// Calls `body` with the target bytes of a symlink (same rules as
    /// ``withName(of:_:)``).
    package func withSymlinkTarget<R: Sendable>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        precondition(entry.kind == .symlink, "internal error: target of a non-symlink")
        return try withStrings(of: entry, offset: entry.targetOffset, count: entry.targetLength, body)
    }

    /// The file id of a file entry.
    package func withFileID<R>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try entry.withFileID(body)
    }

    /// Subdirectories of a directory entry (for st_nlink); 0 for others.
    ///
    /// A paged index counts the directories among the children (one page
    /// or a few); when their page cannot be loaded it answers 0, and
    /// every read of that page reports the damage.
    package func subdirectoryCount(of entry: IndexEntry) -> Int {
        guard entry.kind == .directory else { return 0 }
        if case .paged(let store) = storage { return (try? store.countDirectories(in: entry.children)) ?? 0 }
        var low = 0
        var high = parentPositions.count
        let position = UInt32(entry.position)
        while low < high {
            let mid = (low + high) / 2
            if parentPositions[mid] == position { return Int(subdirectoryCounts[mid]) }
            if parentPositions[mid] < position { low = mid + 1 } else { high = mid }
        }
        return 0
    }

    /// Finds the child of `directory` called `name` by binary search.
    ///
    /// - Throws: as ``entry(at:)``.
    package func lookup(_ name: UnsafeRawBufferPointer, in directory: IndexEntry) throws -> IndexEntry? {
        guard directory.kind == .directory else { return nil }
        var low = directory.children.lowerBound
        var high = directory.children.upperBound
        while low < high {
            let mid = (low + high) / 2
            let candidate = try entry(at: mid)
            let order = try withName(of: candidate) { compareBytes($0, name) }
            if order == 0 { return candidate }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    /// Resolves a '/'-separated path relative to the root. Empty components
    /// and "." are skipped, ".." goes up (the root is its own parent).
    ///
    /// Symlinks in the middle of the path are followed as a shell would, as
    /// long as they stay inside the bundle: an absolute target, or a ".."
    /// of a target at the root, is where a mount would lead to the host's
    /// files (see `SymlinkContainment`). The last component is followed
    /// only when `followingLast` is set. At most 40 links are followed.
    ///
    /// - Throws: `BundleError.notFound`, `.notADirectory`, `.io(ELOOP)`, or
    ///   `.externalSymlink` (naming `path`, no target) for a link that leads
    ///   outside; as ``entry(at:)``.
    package func resolve(path: [UInt8], followingLast: Bool = false) throws -> IndexEntry {
        switch try SymlinkContainment.walk(self, from: root, components: SymlinkContainment.components(of: path),
                                           fromLink: false, followingLast: followingLast) {
        case .reached(let entry): return entry
        case .outside: throw BundleError.externalSymlink(path: path, target: [])
        case .missing: throw BundleError.notFound
        case .notADirectory: throw BundleError.notADirectory
        case .tooManyLinks: throw BundleError.io(errno: ELOOP, operation: "follow symlink", path: path)
        }
    }

    /// The path of `entry` from the root, '/'-separated, without a leading '/'.
    ///
    /// - Throws: as ``entry(at:)``.
    package func path(of entry: IndexEntry) throws -> [UInt8] {
        try path(of: entry, maximumLength: .max)
    }

    /// The path of `entry` for a message: like ``path(of:)``, but built
    /// from the entry upwards only until it is `maximumLength` bytes long,
    /// then starting with "…/" (a chain of nested directories can make a
    /// path of hundreds of megabytes; its end names the entry).
    ///
    /// - Throws: as ``entry(at:)``.
    package func path(of entry: IndexEntry, maximumLength: Int) throws -> [UInt8] {
        var parts: [[UInt8]] = []
        var length = 0
        var current = entry
        while current.position != 0 {
            guard length < maximumLength else {
                parts.append(Array(PrintableText.ellipsis.utf8))
                break
            }
            let name = try name(of: current)
            length += name.count + 1
            parts.append(name)
            current = try parent(of: current)
        }
        return Array(parts.reversed().joined(separator: [UInt8(ascii: "/")]))
    }
}

/// The chunk tables an index validation has checked, by their offset in
/// the string table: a table is read once, however many files share it.
struct CheckedChunkTables {
    private var lengths: [UInt32: (chunks: UInt64, stored: UInt64)] = [:]
    /// Entries copied out of the index at a time (one buffer for every table).
    private static let pieceEntries = 512
    private var piece: [UInt8] = []

    /// The stored length of the checked table at `offset`, if any.
    func storedLength(ofTableAt offset: UInt32) -> UInt64? { lengths[offset]?.stored }

    /// Checks the chunk table at `offset` for a file of `size` bytes (once
    /// per table) and returns the body's stored length.
    ///
    /// - Throws: `BundleError.corruptIndex` when the table lies outside the
    ///   string table, is shared by files of different sizes, or an entry
    ///   does not describe a chunk the format allows (not after its
    ///   predecessor, a raw chunk of the wrong length, a frame no shorter
    ///   than its chunk).
    mutating func storedLength(ofTableAt offset: UInt32, plaintextSize size: UInt64, position: Int, pages: IndexPages,
                               stringsStart: Int, stringsLength: UInt64, layout: ChunkLayout) throws -> UInt64 {
        func bad(_ why: String) -> BundleError { .corruptIndex("file \(position) \(why)") }
        let chunks = layout.chunkCount(forPlaintextSize: size)
        if let known = lengths[offset] {
            guard known.chunks == chunks else { throw bad("shares a chunk table with a file of another size") }
            return known.stored
        }
        guard chunks > 0 else { throw bad("has a chunk table but no chunks") }
        guard IndexRules.chunkTableFits(offset: offset, chunks: chunks, in: stringsLength) else {
            throw bad("has a chunk table outside the string table")
        }
        var previousEnd: UInt64 = 0
        var chunk: UInt64 = 0
        if piece.isEmpty { piece = [UInt8](repeating: 0, count: Self.pieceEntries * ChunkTableWindow.entrySize) }
        while chunk < chunks {
            let n = Int(min(chunks - chunk, UInt64(Self.pieceEntries)))
            try piece.withUnsafeMutableBytes { buffer in
                try pages.copyBytes(at: stringsStart + Int(offset) + Int(chunk) * ChunkTableWindow.entrySize,
                                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<(n * ChunkTableWindow.entrySize)]))
                for k in 0..<n {
                    let entry = ChunkTableWindow.entry(at: k, in: UnsafeRawBufferPointer(buffer))
                    let length = UInt64(layout.plaintextRange(ofChunk: chunk + UInt64(k), plaintextSize: size).count)
                    guard layout.isValidTableEntry(previousEnd: previousEnd, entry: entry, plaintextLength: length) else {
                        throw bad("has an invalid chunk table entry for chunk \(chunk + UInt64(k))")
                    }
                    previousEnd = ChunkTableWindow.end(ofEntry: entry)
                }
            }
            chunk += UInt64(n)
        }
        lengths[offset] = (chunks, previousEnd)
        return previousEnd
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
