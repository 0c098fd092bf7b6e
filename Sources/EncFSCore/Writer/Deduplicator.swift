import CryptCore

/// Stores each distinct file content once (whole-file deduplication,
/// always on): a file whose contents equal a body already stored gets that
/// body, with its file id, chunks and chunk table.
///
/// Only files whose size another file has can be duplicates, so only they
/// are hashed (SHA-256 of the plaintext): the first of a size while it is
/// encrypted, later ones in a read of their own before it is decided
/// whether to encrypt them (a file read twice only when its size is shared
/// and its contents are not). The digests stay in the packer's memory and
/// are never written.
struct Deduplicator {
    /// How many files have each size (sizes of one file are left out).
    private var sharedSizes: [UInt64: Int] = [:]
    /// Stored bodies by (size ‖ content digest).
    private var bodies: [[UInt8]: FileBody] = [:]
    /// Sizes with at least one body in `bodies`.
    private var storedSizes: Set<UInt64> = []

    init(_ nodes: [SourceTree.Node]) {
        var counts: [UInt64: Int] = [:]
        for node in nodes where node.kind == .file && node.size > 0 { counts[node.size, default: 0] += 1 }
        sharedSizes = counts.filter { $0.value > 1 }
    }

    /// Stores `source` (of `size` bytes when the walk saw it) as a new body
    /// in `sink`, or finds the stored body with the same contents.
    ///
    /// - Returns: the file's snapshot, its body, and whether the body was
    ///   already stored (shared).
    mutating func store(_ source: FileEncryptor.Source, size: UInt64, encryptor: FileEncryptor,
                        sink: ChunkSink) throws -> (FileEncryptor.Snapshot, FileBody, shared: Bool) {
        guard sharedSizes[size] != nil else {
            let (stored, body) = try encrypt(source, encryptor: encryptor, sink: sink, hasher: nil)
            return (stored.snapshot, body, false)
        }
        if storedSizes.contains(size) {
            let (snapshot, digest) = try encryptor.digest(source)
            if let body = bodies[Self.key(size: snapshot.size, digest: digest)] { return (snapshot, body, true) }
        }
        let hasher = SHA256.Hasher()
        let (stored, body) = try encrypt(source, encryptor: encryptor, sink: sink, hasher: hasher)
        let key = Self.key(size: stored.snapshot.size, digest: hasher.finalize())
        if bodies[key] == nil {
            bodies[key] = body
            storedSizes.insert(stored.snapshot.size)
        }
        return (stored.snapshot, body, false)
    }

    private func encrypt(_ source: FileEncryptor.Source, encryptor: FileEncryptor, sink: ChunkSink,
                         hasher: SHA256.Hasher?) throws -> (FileEncryptor.Stored, FileBody) {
        let id = try randomBytes(BundleFormat.idSize)
        let first = sink.dataLength
        let stored = try encryptor.encrypt(source, fileID: id, sink: sink, hasher: hasher)
        return (stored, FileBody(first: first, fileID: id, chunkTable: stored.chunkTable, storedSize: stored.storedSize))
    }

    private static func key(size: UInt64, digest: [UInt8]) -> [UInt8] {
        var key = digest
        key.appendLE(size)
        return key
    }
}
