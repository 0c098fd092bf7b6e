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
/// 32  64·n records (see IndexEntry)
///  …  S bytes: names and symlink targets
/// ```
/// Records are in breadth-first order: the children of each directory are
/// contiguous, sorted by name bytes, and come after their parent, so lookup
/// is a binary search and the tree cannot hold a cycle.
public final class BundleIndex: Sendable {
    static let magic: [UInt8] = Array("ENCFSIDX".utf8)
    static let headerSize = 32

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
    public var isPaged: Bool { flatPages == nil }
    /// Number of entries, root included.
    public let count: Int
    /// When the bundle was packed (seconds since the epoch).
    public let creationTime: Int64
    private let recordsOffset = BundleIndex.headerSize
    let stringsOffset: Int
    /// The bundle's chunk layout.
    public let layout: ChunkLayout
    /// Sum of all file sizes.
    public let totalFileBytes: UInt64
    /// Number of regular files.
    public let fileCount: Int
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
    public let features: BundleFeatures
    /// Sum of the stored sizes of distinct file bodies (shared bodies
    /// counted once): what the files take in the payload.
    public let storedFileBytes: UInt64
    /// Sum of the plaintext sizes of distinct file bodies: what
    /// ``totalFileBytes`` would be without deduplication's repeats.
    public let distinctFileBytes: UInt64
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
        let parsed = try Self.validate(pages, layout: layout, dataLength: dataLength, features: features)
        storage = .flat(pages)
        self.dataLength = dataLength
        self.layout = layout
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
    public convenience init(byteCount: Int, layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures = .version1,
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
    public convenience init(plaintext: SecureBytes, layout: ChunkLayout, dataLength: UInt64,
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
    public func entry(at position: Int) throws -> IndexEntry {
        precondition(position >= 0 && position < count, "internal error: index position \(position) out of range")
        switch storage {
        case .flat(let pages):
            return try pages.withBytes(at: recordsOffset + position * IndexEntry.recordSize, count: IndexEntry.recordSize) {
                IndexEntry(record: $0, position: position)
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
    public func entry(inode: UInt64) throws -> IndexEntry? {
        guard inode >= 1, inode <= UInt64(count) else { return nil }
        return try entry(at: Int(inode - 1))
    }

    /// The root directory.
    public var root: IndexEntry {
        get throws { try entry(at: 0) }
    }

    /// Calls `body` with the name bytes of `entry` (valid during the call;
    /// for a paged index `body` runs under its lock and must not call back
    /// into the index).
    public func withName<R: Sendable>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withStrings(of: entry, offset: Int(entry.nameOffset), count: Int(entry.nameLength), body)
    }

    /// The name bytes of `entry` as a new array (not for hot paths).
    public func name(of entry: IndexEntry) throws -> [UInt8] { try withName(of: entry) { Array($0) } }

    /// Copies the name of `entry` into `buffer` (at least 255 bytes).
    ///
    /// - Returns: the name's length.
    public func copyName(of entry: IndexEntry, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
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
    public func withSymlinkTarget<R: Sendable>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        precondition(entry.kind == .symlink, "internal error: target of a non-symlink")
        return try withStrings(of: entry, offset: Int(entry.first), count: Int(entry.size), body)
    }

    /// The file id of a file entry.
    public func withFileID<R>(of entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try entry.withFileID(body)
    }

    /// Subdirectories of a directory entry (for st_nlink); 0 for others.
    ///
    /// A paged index counts the directories among the children (one page
    /// or a few); when their page cannot be loaded it answers 0, and
    /// every read of that page reports the damage.
    public func subdirectoryCount(of entry: IndexEntry) -> Int {
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
    public func lookup(_ name: UnsafeRawBufferPointer, in directory: IndexEntry) throws -> IndexEntry? {
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
    ///   `.rejected` for a link that leads outside; as ``entry(at:)``.
    public func resolve(path: [UInt8], followingLast: Bool = false) throws -> IndexEntry {
        switch try SymlinkContainment.walk(self, from: root, components: SymlinkContainment.components(of: path),
                                           fromLink: false, followingLast: followingLast) {
        case .reached(let entry): return entry
        case .outside: throw BundleError.rejected("symlink points outside the bundle")
        case .missing: throw BundleError.notFound
        case .notADirectory: throw BundleError.notADirectory
        case .tooManyLinks: throw BundleError.io(errno: ELOOP, operation: "follow symlink", path: path)
        }
    }

    /// The path of `entry` from the root, '/'-separated, without a leading '/'.
    ///
    /// - Throws: as ``entry(at:)``.
    public func path(of entry: IndexEntry) throws -> [UInt8] {
        try path(of: entry, maximumLength: .max)
    }

    /// The path of `entry` for a message: like ``path(of:)``, but built
    /// from the entry upwards only until it is `maximumLength` bytes long,
    /// then starting with "…/" (a chain of nested directories can make a
    /// path of hundreds of megabytes; its end names the entry).
    ///
    /// - Throws: as ``entry(at:)``.
    public func path(of entry: IndexEntry, maximumLength: Int) throws -> [UInt8] {
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

    // MARK: - Validation

    private struct Parsed {
        var count: Int
        var creationTime: Int64
        var totalFileBytes: UInt64
        var fileCount: Int
        var parentPositions: [UInt32]
        var subdirectoryCounts: [UInt32]
        var suspectSymlinkPositions: [UInt32]
        var storedFileBytes: UInt64
        var distinctFileBytes: UInt64
    }

    /// Records validated per copy out of the pages.
    private static let recordBatch = 256

    /// Checks every rule of the format, reading the plaintext front to back
    /// (records in batches, names as they come, each parent once per run of
    /// siblings), so a paged index is validated with a bounded cache.
    private static func validate(_ pages: IndexPages, layout: ChunkLayout, dataLength: UInt64,
                                 features: BundleFeatures) throws -> Parsed {
        func bad(_ why: String) -> BundleError { .corruptIndex(why) }
        guard pages.count >= headerSize else { throw bad("bad index magic") }
        let (magicOK, count, reservedOK, stringsLength, creationTime) = try pages.withBytes(at: 0, count: headerSize) { b in
            (b.starts(with: magic), Int(b.le32(at: 8)), b.le32(at: 12) == 0, b.le64(at: 16), Int64(bitPattern: b.le64(at: 24)))
        }
        guard magicOK else { throw bad("bad index magic") }
        guard count >= 1, count <= BundleFormat.maximumEntries else { throw bad("entry count \(count)") }
        guard reservedOK else { throw bad("reserved bytes are not zero") }
        let recordsEnd = UInt64(headerSize) + UInt64(count) * UInt64(IndexEntry.recordSize)
        guard stringsLength <= UInt64(pages.count), recordsEnd + stringsLength == UInt64(pages.count) else {
            throw bad("index length \(pages.count) does not match \(count) entries and \(stringsLength) string bytes")
        }
        let stringsStart = Int(recordsEnd)
        // Scratch for a batch of records and two names; wiped on the way out.
        let batch = UnsafeMutableRawBufferPointer.allocate(byteCount: recordBatch * IndexEntry.recordSize, alignment: 16)
        let names = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * 256, alignment: 16)
        // The names of a batch in one piece when they lie together (encfs-pack
        // writes them in record order): one copy out of the page cache per
        // batch instead of one per record, most of this loop's time.
        let nameWindow = UnsafeMutableRawBufferPointer.allocate(byteCount: recordBatch * 256, alignment: 16)
        defer {
            SecureBytes.wipe(batch)
            SecureBytes.wipe(names)
            SecureBytes.wipe(nameWindow)
            batch.deallocate()
            names.deallocate()
            nameWindow.deallocate()
        }
        var current = UnsafeMutableRawBufferPointer(rebasing: names[0..<256])
        var previous = UnsafeMutableRawBufferPointer(rebasing: names[256..<512])
        var previousLength = 0
        // The parent of the last record checked: positions, child range.
        var parentPosition = -1
        var parentIsDirectory = false
        var parentFirst: UInt64 = 0
        var parentSize: UInt64 = 0
        // Files' chunk data must not overlap. encfs-pack lays it out in
        // record order, so the check is one running end, without an array
        // of ranges (16 bytes per file); any other order falls back to
        // sorting the ranges after the loop.
        var dataEnd: UInt64 = 0
        var dataInRecordOrder = true
        // Version 2 only: positions of the bodies seen first, in record
        // (= data) order, so that a repeat of a shared body is checked
        // against the body it names with a binary search: 4 bytes per
        // distinct body, where collecting every file's range for a sort
        // took 48 (and the sort's scratch) per file.
        var firstSeenBodies: [UInt32] = []
        var storedFileBytes: UInt64 = 0
        var distinctFileBytes: UInt64 = 0
        // Chunk tables checked so far, by offset: files that share a body
        // share its table, which is checked once.
        var checkedTables = CheckedChunkTables()
        var totalFileBytes: UInt64 = 0
        var fileCount = 0
        var childTotal = 0
        var nextChild = 1 // breadth-first: child ranges tile 1 ..< count in order
        var parentPositions: [UInt32] = []
        var subdirectoryCounts: [UInt32] = []
        var suspectSymlinkPositions: [UInt32] = []
        var batchStart = 0
        while batchStart < count {
            let batchCount = min(recordBatch, count - batchStart)
            try pages.copyBytes(at: headerSize + batchStart * IndexEntry.recordSize,
                                into: UnsafeMutableRawBufferPointer(rebasing: batch[0..<(batchCount * IndexEntry.recordSize)]))
            let window = try copyNames(of: UnsafeRawBufferPointer(rebasing: batch[0..<(batchCount * IndexEntry.recordSize)]),
                                       pages: pages, stringsStart: stringsStart, stringsLength: stringsLength, into: nameWindow)
            for k in 0..<batchCount {
                let position = batchStart + k
                let r = UnsafeRawBufferPointer(rebasing: batch[(k * IndexEntry.recordSize)..<((k + 1) * IndexEntry.recordSize)])
                guard let kind = IndexEntry.Kind(rawValue: r[4]) else { throw bad("entry \(position) has unknown kind \(r[4])") }
                let hasTable = kind == .file && features.isCompressed && r[5] == IndexEntry.hasChunkTableFlag
                guard hasTable || (r[5] == 0 && r.le32(at: 28) == 0), r.le16(at: 14) == 0 else {
                    throw bad("entry \(position) has non-zero reserved bytes")
                }
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
                    let name = UnsafeMutableRawBufferPointer(rebasing: current[0..<nameLength])
                    if Int(nameOffset) >= window.start, Int(nameOffset) + nameLength <= window.start + window.count {
                        let from = Int(nameOffset) - window.start
                        name.copyMemory(from: UnsafeRawBufferPointer(rebasing: nameWindow[from..<(from + nameLength)]))
                    } else {
                        try pages.copyBytes(at: stringsStart + Int(nameOffset), into: name)
                    }
                    guard !name.contains(0), !name.contains(UInt8(ascii: "/")),
                          !(nameLength == 1 && name[0] == UInt8(ascii: ".")),
                          !(nameLength == 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: ".")) else {
                        throw bad("entry \(position) has an invalid name")
                    }
                    if parent != parentPosition {
                        if parent >= batchStart {
                            let p = UnsafeRawBufferPointer(rebasing: batch[((parent - batchStart) * IndexEntry.recordSize)...])
                            (parentIsDirectory, parentFirst, parentSize) = (p[4] == IndexEntry.Kind.directory.rawValue, p.le64(at: 40), p.le64(at: 32))
                        } else {
                            (parentIsDirectory, parentFirst, parentSize) = try pages.withBytes(
                                at: headerSize + parent * IndexEntry.recordSize, count: IndexEntry.recordSize) { p in
                                (p[4] == IndexEntry.Kind.directory.rawValue, p.le64(at: 40), p.le64(at: 32))
                            }
                        }
                        parentPosition = parent
                    }
                    guard parentIsDirectory, UInt64(position) >= parentFirst, UInt64(position) - parentFirst < parentSize else {
                        throw bad("entry \(position) is not among its parent's children")
                    }
                    if UInt64(position) > parentFirst {
                        guard compareBytes(UnsafeRawBufferPointer(rebasing: previous[0..<previousLength]), UnsafeRawBufferPointer(name)) < 0 else {
                            throw bad("entries \(position - 1) and \(position) are not in name order")
                        }
                    }
                    swap(&current, &previous)
                    previousLength = nameLength
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
                        // Parents come in ascending order (breadth-first), so
                        // the counts stay sorted by position.
                        if parentPositions.last == UInt32(parent) {
                            subdirectoryCounts[subdirectoryCounts.count - 1] += 1
                        } else {
                            guard parentPositions.last.map({ $0 < UInt32(parent) }) ?? true else {
                                throw bad("entry \(position) is out of breadth-first order")
                            }
                            parentPositions.append(UInt32(parent))
                            subdirectoryCounts.append(1)
                        }
                    }
                case .file:
                    guard layout.isValidPlaintextSize(size) else { throw bad("file \(position) is too large") }
                    let length = hasTable
                        ? try checkedTables.storedLength(ofTableAt: r.le32(at: 28), plaintextSize: size, position: position,
                                                         pages: pages, stringsStart: stringsStart, stringsLength: stringsLength,
                                                         layout: layout)
                        : layout.ciphertextSize(forPlaintextSize: size)
                    guard first <= dataLength, length <= dataLength - first else {
                        throw bad("file \(position) lies outside the data region")
                    }
                    if length > 0 {
                        if first < dataEnd {
                            // A repeat: legitimate only as an exact copy of
                            // an earlier body's record (version 2).
                            var repeated = false
                            if features.allowsSharedBodies, dataInRecordOrder {
                                repeated = try BodyRecord(r).repeats(firstSeenBodies, pages: pages)
                            }
                            if !repeated { dataInRecordOrder = false }
                        } else {
                            // In a bundle encfs-pack wrote, a body seen for
                            // the first time lies after every earlier one;
                            // repeats of shared bodies lie before.
                            storedFileBytes &+= length
                            distinctFileBytes &+= size
                            if features.allowsSharedBodies { firstSeenBodies.append(UInt32(position)) }
                        }
                        dataEnd = max(dataEnd, first + length)
                    }
                    totalFileBytes &+= size
                    fileCount += 1
                case .symlink:
                    guard idIsZero else { throw bad("symlink \(position) has a file id") }
                    guard size >= 1, size <= UInt64(BundleFormat.maximumSymlinkLength), first <= stringsLength,
                          size <= stringsLength - first else { throw bad("symlink \(position) has an invalid target") }
                    let (holdsNUL, suspect) = try pages.withBytes(at: stringsStart + Int(first), count: Int(size)) {
                        ($0.contains(0), SymlinkContainment.isSuspect($0))
                    }
                    guard !holdsNUL else { throw bad("symlink \(position) target holds NUL") }
                    if suspect { suspectSymlinkPositions.append(UInt32(position)) }
                }
            }
            batchStart += batchCount
        }
        guard childTotal == count - 1, nextChild == count else { throw bad("directory child ranges do not cover every entry") }
        firstSeenBodies = []
        if !dataInRecordOrder {
            guard let distinct = try distinctBodyBytes(pages, count: count, layout: layout, features: features,
                                                       tables: checkedTables) else {
                throw bad("file data ranges overlap")
            }
            (storedFileBytes, distinctFileBytes) = distinct
        }
        return Parsed(count: count, creationTime: creationTime, totalFileBytes: totalFileBytes, fileCount: fileCount,
                      parentPositions: parentPositions, subdirectoryCounts: subdirectoryCounts,
                      suspectSymlinkPositions: suspectSymlinkPositions, storedFileBytes: storedFileBytes,
                      distinctFileBytes: distinctFileBytes)
    }
}

extension BundleIndex {
    /// Copies the part of the strings region that holds the names of the
    /// records in `batch` into `window`, when it fits; the caller checks
    /// each name's bounds itself and copies a name outside the window on
    /// its own.
    ///
    /// - Returns: where the window starts in the strings region and how
    ///   many bytes it holds (0 when the names do not fit or lie outside
    ///   the region).
    fileprivate static func copyNames(of batch: UnsafeRawBufferPointer, pages: IndexPages, stringsStart: Int,
                                      stringsLength: UInt64, into window: UnsafeMutableRawBufferPointer) throws -> (start: Int, count: Int) {
        var low = UInt64.max
        var high: UInt64 = 0
        for k in 0..<(batch.count / IndexEntry.recordSize) {
            let r = UnsafeRawBufferPointer(rebasing: batch[(k * IndexEntry.recordSize)..<((k + 1) * IndexEntry.recordSize)])
            let length = UInt64(r.le16(at: 12))
            guard length > 0 else { continue }
            let offset = UInt64(r.le32(at: 8))
            low = min(low, offset)
            high = max(high, offset + length)
        }
        guard low < high, high <= stringsLength, high - low <= UInt64(window.count) else { return (0, 0) }
        let count = Int(high - low)
        try pages.copyBytes(at: stringsStart + Int(low), into: UnsafeMutableRawBufferPointer(rebasing: window[0..<count]))
        return (Int(low), count)
    }

    /// For an index whose data is not in record order (shared bodies, or an
    /// index encfs-pack did not write): the stored bytes of its distinct
    /// bodies and their plaintext bytes, or nil when two files' chunk data
    /// overlap.
    ///
    /// Two files may lie at the same place only in a version 2 bundle, and
    /// only as one body: the same offset, size, file id and chunk table.
    /// Anything else that overlaps would have two files read one body with
    /// different keys or lengths. Runs after every record has been checked,
    /// so sizes, offsets and tables are in range.
    fileprivate static func distinctBodyBytes(_ pages: IndexPages, count: Int, layout: ChunkLayout, features: BundleFeatures,
                                              tables: CheckedChunkTables) throws -> (stored: UInt64, plaintext: UInt64)? {
        // The record's body fields, and where its chunk data ends.
        var bodies: [(record: BodyRecord, end: UInt64)] = []
        for position in 0..<count {
            let record = try pages.withBytes(at: headerSize + position * IndexEntry.recordSize, count: IndexEntry.recordSize) { r in
                r[4] == IndexEntry.Kind.file.rawValue ? BodyRecord(r) : nil
            }
            guard let record else { continue }
            let length = record.flags != 0 ? tables.storedLength(ofTableAt: record.table) ?? 0
                                            : layout.ciphertextSize(forPlaintextSize: record.size)
            if length > 0 { bodies.append((record, record.start + length)) }
        }
        bodies.sort { $0.record.start < $1.record.start }
        var total: (stored: UInt64, plaintext: UInt64) = (0, 0)
        for i in bodies.indices {
            if i > 0 {
                if bodies[i].record == bodies[i - 1].record && features.allowsSharedBodies { continue }
                if bodies[i].record.start < bodies[i - 1].end { return nil }
            }
            total.stored &+= bodies[i].end - bodies[i].record.start
            total.plaintext &+= bodies[i].record.size
        }
        return total
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
        let bytes = chunks.multipliedReportingOverflow(by: UInt64(ChunkTableWindow.entrySize))
        guard !bytes.overflow, UInt64(offset) <= stringsLength, bytes.partialValue <= stringsLength - UInt64(offset) else {
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
                    let entry = UnsafeRawBufferPointer(buffer).le64(at: k * ChunkTableWindow.entrySize)
                    let length = UInt64(layout.plaintextRange(ofChunk: chunk + UInt64(k), plaintextSize: size).count)
                    guard layout.isValidTableEntry(previousEnd: previousEnd, entry: entry, plaintextLength: length) else {
                        throw bad("has an invalid chunk table entry for chunk \(chunk + UInt64(k))")
                    }
                    previousEnd = entry & ~ChunkTableWindow.compressedFlag
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
