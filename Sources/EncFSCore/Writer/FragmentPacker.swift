import CryptCore

/// Packs small files into shared fragments (format version 2 with
/// fragments; docs/FORMAT.md, "Fragments"): each fragment is one fragment
/// unit (256 KiB by default, four times a 64 KiB chunk) of small files back
/// to back, compressed and sealed by a ``ChunkPipeline`` like any chunk,
/// under a key of its own (derived from its random id, as a file's is from
/// the file id).
///
/// One frame per few dozen small files instead of one each: zstd sees
/// their neighbours, and the tag, chunk table entry and frame header are
/// paid once per fragment. Files are packed after every other body, sorted
/// by extension and then by path, so that files of one kind sit side by
/// side (the order mksquashfs and DwarFS use; on the source trees measured
/// it is within 0.04 % of path order alone: docs/PERFORMANCE.md, "Levels,
/// chunk and fragment sizes").
/// A file whose contents an earlier slice has is given that slice
/// (deduplication across fragments: SHA-256 of the plaintext, in memory
/// only, as ``Deduplicator`` does).
struct FragmentPacker {
    /// A file packed into a fragment: its body and its slice's offset in it.
    struct Placement {
        let body: FileBody
        let offset: UInt64
    }

    /// The threshold `--compress zstd` packs with: files below the chunk
    /// size when fragment units are larger than chunks, below half of it
    /// when a fragment is one chunk (docs/PERFORMANCE.md, "Levels, chunk
    /// and fragment sizes": a whole chunk's files fill a unit of one chunk
    /// badly, and gain 2 … 3 % in larger units).
    static func defaultThreshold(chunkSize: UInt64, unitSize: UInt64) -> Int {
        Int(unitSize > chunkSize ? chunkSize : chunkSize / 2)
    }

    /// The fragment unit `--compress zstd` packs with, as log2: 256 KiB
    /// (docs/PERFORMANCE.md, "Levels, chunk and fragment sizes": 1 MiB
    /// was measured too), never below the chunk size.
    static func defaultUnitLog2(chunkSizeLog2: UInt8) -> UInt8 { max(18, chunkSizeLog2) }

    /// Files below this size go into fragments (at most the chunk size).
    let threshold: UInt64
    /// Bytes a fragment is filled to: one fragment unit.
    let capacity: Int
    /// Placements by node position.
    private(set) var placements: [Int: Placement] = [:]
    /// Fragments written.
    private(set) var fragmentCount = 0
    /// Files given a slice another file already had.
    private(set) var sharedFiles = 0
    private(set) var sharedBytes: UInt64 = 0

    /// - Parameters:
    ///   - threshold: the size below which a file goes into a fragment;
    ///     0 packs none.
    ///   - chunkSize: the bundle's chunk size (the largest threshold).
    ///   - unit: the layout of fragment units (a fragment's capacity).
    init(threshold: Int, chunkSize: UInt64, unit: ChunkLayout) {
        self.threshold = min(UInt64(max(threshold, 0)), chunkSize)
        capacity = Int(unit.chunkSize)
    }

    /// Whether a file of `size` bytes (as the walk saw it) goes into a
    /// fragment.
    func takes(size: UInt64) -> Bool { size > 0 && size < threshold }

    /// The positions of the files that go into fragments, in the order
    /// they are packed: by extension, then by path.
    func order(_ nodes: [SourceTree.Node]) -> [Int] {
        let positions = nodes.indices.filter { nodes[$0].kind == .file && takes(size: nodes[$0].size) }
        let keyed = positions.map { (position: $0, ext: Self.extensionBytes(of: nodes[$0].name)) }
        return keyed.sorted {
            guard $0.ext == $1.ext else { return $0.ext.lexicographicallyPrecedes($1.ext) }
            return nodes[$0.position].relativePath.lexicographicallyPrecedes(nodes[$1.position].relativePath)
        }.map(\.position)
    }

    /// Reads the files `sources` (in this order) into fragments handed to
    /// `pipeline` (nil: `encryptor`'s), one unit each.
    ///
    /// - Parameter sources: each file's node position, source and size
    ///   as the walk saw it.
    /// - Parameter pipeline: compresses and seals units of ``capacity``
    ///   bytes.
    /// - Returns: each file's snapshot, by node position.
    /// - Throws: `BundleError.sourceChanged` for a file that grew past a
    ///   fragment or changed while read, `.io`, `.crypto`.
    mutating func pack(_ sources: [(position: Int, source: FileEncryptor.Source, size: UInt64)], encryptor: FileEncryptor,
                       pipeline given: ChunkPipeline?) throws -> [Int: FileEncryptor.Snapshot] {
        guard !sources.isEmpty else { return [:] }
        guard let pipeline = given ?? encryptor.pipeline else { preconditionFailure("internal error: fragments without compression") }
        let chunkSize = capacity
        var snapshots: [Int: FileEncryptor.Snapshot] = [:]
        var known: [[UInt8]: Placement] = [:]
        var current: (slot: ChunkPipeline.Slot, body: FileBody, fill: Int)?
        for (position, source, size) in sources {
            if current.map({ $0.fill + Int(size) > chunkSize }) ?? true {
                try submit(&current, pipeline: pipeline, encryptor: encryptor)
                current = (try pipeline.acquire(), FileBody(first: 0, fileID: try randomBytes(BundleFormat.idSize)), 0)
            }
            guard let (slot, body, fill) = current else { preconditionFailure("internal error: no fragment") }
            let space = UnsafeMutableRawBufferPointer(rebasing: slot.plaintext[fill..<chunkSize])
            let snapshot = try encryptor.readSlice(source, into: space)
            snapshots[position] = snapshot
            encryptor.progress?.finishFile()
            let slice = UnsafeMutableRawBufferPointer(rebasing: space[0..<Int(snapshot.size)])
            let key = Self.key(of: UnsafeRawBufferPointer(slice))
            if let placement = known[key] {
                placements[position] = placement
                sharedFiles += 1
                sharedBytes += snapshot.size
                SecureBytes.wipe(slice)
                continue
            }
            // A file that shrank to nothing since the walk is an empty
            // file: no slice.
            guard snapshot.size > 0 else { continue }
            let placement = Placement(body: body, offset: UInt64(fill))
            placements[position] = placement
            known[key] = placement
            current?.fill += Int(snapshot.size)
        }
        try submit(&current, pipeline: pipeline, encryptor: encryptor)
        return snapshots
    }

    /// Hands the fragment being filled to the pipeline (one chunk, the
    /// last), or gives its slot back empty.
    private mutating func submit(_ current: inout (slot: ChunkPipeline.Slot, body: FileBody, fill: Int)?,
                                 pipeline: ChunkPipeline, encryptor: FileEncryptor) throws {
        guard let (slot, body, fill) = current else { return }
        current = nil
        guard fill > 0 else {
            pipeline.giveBack(slot)
            return
        }
        body.fragmentSize = UInt64(fill)
        pipeline.submit(slot, body: body, key: try encryptor.key(for: body), chunk: 0, last: true, length: fill)
        fragmentCount += 1
    }

    /// The bytes after a name's last dot (none for a name that starts
    /// with its only dot, or has none).
    static func extensionBytes(of name: [UInt8]) -> ArraySlice<UInt8> {
        guard let dot = name.lastIndex(of: UInt8(ascii: ".")), dot > 0 else { return [] }
        return name[(dot + 1)...]
    }

    /// Size ‖ SHA-256 of a slice's plaintext: what makes two slices one.
    private static func key(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let hasher = SHA256.Hasher()
        hasher.update(bytes)
        var key = hasher.finalize()
        key.appendLE(UInt64(bytes.count))
        return key
    }
}
