import CryptCore

/// Serializes the walked tree into index plaintext (layout in `BundleIndex`).
enum IndexBuilder {
    /// The index key is unique per bundle and seals exactly one message.
    static let zeroNonce = [UInt8](repeating: 0, count: 12)

    /// Associated data of the sealed index: bundle id ‖ chunk size log2 ‖
    /// payload length ‖ index offset, so the index cannot be moved to
    /// another bundle or position.
    ///
    /// Version 2 appends format version (u16) ‖ compression method (u8), so
    /// a header re-MACed with another method cannot keep its index. A
    /// bundle with fragments appends its header flags (u16), so the index
    /// opens only under the header that says how to read its records.
    static func associatedData(_ header: BundleHeader) -> [UInt8] {
        var aad = header.bundleID
        aad.append(header.layout.chunkSizeLog2)
        aad.appendLE(header.payloadLength)
        aad.appendLE(header.indexOffset)
        if header.features.formatVersion != BundleFormat.version {
            aad.appendLE(header.features.formatVersion)
            aad.append(header.features.compression.rawValue)
        }
        if header.features.hasFragments { aad.appendLE(header.features.headerFlags) }
        return aad
    }

    /// - Throws: `BundleError.limitExceeded` when names and targets exceed
    ///   the 4 GiB a u32 name offset can address.
    ///
    /// - Parameter bodies: each file's body by node position (nil for
    ///   others); files that share a body (deduplicated) share one
    ///   ``FileBody``, whose chunk table is written once; so do the slices
    ///   of one fragment, whose descriptor is written once.
    /// - Parameter sliceOffsets: where each fragment slice lies in its
    ///   fragment, by node position.
    static func serialize(_ nodes: [SourceTree.Node], bodies: [FileBody?], sliceOffsets: [Int: UInt64] = [:],
                          creationTime: Int64) throws -> [UInt8] {
        // Sized up front so the arrays never reallocate: a reallocation would
        // leave an unwiped copy of the names in freed memory.
        var tableBytes = 0
        var counted = Set<ObjectIdentifier>()
        for case let body? in bodies where counted.insert(ObjectIdentifier(body)).inserted {
            tableBytes += body.fragmentSize != nil ? FragmentDescriptor.headSize + body.chunkCount * ChunkTableWindow.entrySize
                : (body.chunkTable?.count ?? 0) * ChunkTableWindow.entrySize
        }
        let stringsLength = nodes.reduce(0) { $0 + $1.name.count + $1.symlinkTarget.count } + tableBytes
        guard stringsLength <= Int(UInt32.max) else { throw BundleError.limitExceeded("names take more than 4 GiB") }
        var strings: [UInt8] = []
        strings.reserveCapacity(stringsLength)
        defer { strings.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        var out: [UInt8] = []
        out.reserveCapacity(FlatIndexHeader.size + nodes.count * IndexRecord.size + stringsLength)
        FlatIndexHeader.append(entryCount: nodes.count, creationTime: creationTime, to: &out)
        for (position, node) in nodes.enumerated() {
            let name = (offset: UInt32(strings.count), length: UInt16(node.name.count))
            strings += node.name
            let recordBody: IndexRecord.Body
            switch node.kind {
            case .directory:
                recordBody = .directory(firstChild: UInt64(node.firstChild), count: UInt64(node.childCount))
            case .file:
                guard let body = bodies[position] else { preconditionFailure("internal error: a file without a body") }
                if body.fragmentSize != nil {
                    guard let offset = sliceOffsets[position] else { preconditionFailure("internal error: a slice without an offset") }
                    recordBody = .fragmentSlice(offset: offset, size: node.size, descriptor: appendDescriptor(of: body, to: &strings),
                                                fileID: body.fileID)
                    break
                }
                recordBody = .file(payloadOffset: body.first, size: node.size, chunkTable: appendTable(of: body, to: &strings),
                                   fileID: body.fileID)
            case .symlink:
                recordBody = .symlink(targetOffset: UInt64(strings.count), length: UInt64(node.symlinkTarget.count))
                strings += node.symlinkTarget
            }
            IndexRecord.append(parent: node.parent, mode: node.mode, name: name,
                               mtime: (node.mtimeSeconds, node.mtimeNanoseconds), body: recordBody, to: &out)
        }
        FlatIndexHeader.setStringsLength(UInt64(strings.count), in: &out)
        out += strings
        return out
    }

    /// Appends the descriptor of fragment `body` to the strings the first
    /// time one of its slices is written (the paged index writer moves it
    /// into the table stream).
    ///
    /// - Returns: where the descriptor lies in the strings.
    private static func appendDescriptor(of body: FileBody, to strings: inout [UInt8]) -> UInt32 {
        if let known = body.chunkTableOffset { return known }
        guard let size = body.fragmentSize else { preconditionFailure("internal error: a descriptor of a file's body") }
        body.chunkTableOffset = UInt32(strings.count)
        FragmentDescriptor(payloadOffset: body.first, plaintextSize: size).append(table: body.allTableEntries, to: &strings)
        return UInt32(body.chunkTableOffset ?? 0)
    }

    /// Appends the chunk table of `body` to the strings the first time one
    /// of its files is written (a shared body's table is written once).
    ///
    /// - Returns: where the table lies in the strings, nil when the body
    ///   has none.
    private static func appendTable(of body: FileBody, to strings: inout [UInt8]) -> UInt32? {
        guard let table = body.chunkTable else { return nil }
        if body.chunkTableOffset == nil {
            body.chunkTableOffset = UInt32(strings.count)
            for entry in table { strings.appendLE(entry) }
        }
        return body.chunkTableOffset
    }
}
/// One stored file body: where its chunks start, its file id, and (when
/// compressed) its chunk table. Files with identical contents share one
/// (deduplication), so they share its id, its chunks and its table.
///
/// Filled in as the body's chunks reach the sink: with a
/// ``ChunkPipeline`` that is after the file was read, so nothing here is
/// final until the pipeline has finished.
final class FileBody {
    /// Payload offset of the body's first chunk.
    var first: UInt64
    /// The 16-byte file id.
    let fileID: [UInt8]
    /// Sealed bytes the body takes in the payload.
    private(set) var storedSize: UInt64 = 0
    /// Chunk table entries (``ChunkTableWindow``) of a compressed bundle's
    /// body, one per chunk recorded.
    private var tableEntries: [UInt64] = []
    /// Whether any chunk is a zstd frame: a body with none lies at fixed
    /// offsets and needs no table.
    private var hasFrames = false
    /// Where the table (a fragment: its descriptor) went in the string
    /// table, once written.
    var chunkTableOffset: UInt32?
    /// A fragment's plaintext length (set when it is handed to the
    /// pipeline); nil for a file's own body.
    var fragmentSize: UInt64?

    init(first: UInt64, fileID: [UInt8], fragmentSize: UInt64? = nil) {
        self.first = first
        self.fileID = fileID
        self.fragmentSize = fragmentSize
    }

    /// Every chunk table entry recorded, raw chunks' too (a fragment's
    /// descriptor always holds its table).
    var allTableEntries: [UInt64] { tableEntries }

    /// Chunks recorded.
    var chunkCount: Int { tableEntries.count }

    /// The chunk table, nil when the chunks lie at fixed offsets.
    var chunkTable: [UInt64]? { hasFrames ? tableEntries : nil }

    /// Records the next chunk of a compressed bundle's body.
    func record(sealedLength: UInt64, encoding: StoredChunkEncoding) {
        storedSize += sealedLength
        tableEntries.append(encoding == .zstd ? storedSize | ChunkTableWindow.compressedFlag : storedSize)
        hasFrames = hasFrames || encoding == .zstd
    }

    /// Records the chunks of an uncompressed body, `sealedLength` bytes in all.
    func recordUncompressed(sealedLength: UInt64) {
        storedSize += sealedLength
    }
}
