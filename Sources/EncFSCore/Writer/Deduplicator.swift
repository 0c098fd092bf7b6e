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
            let (snapshot, body) = try encrypt(source, encryptor: encryptor, sink: sink, hasher: nil)
            return (snapshot, body, false)
        }
        if storedSizes.contains(size) {
            let (snapshot, digest) = try encryptor.digest(source)
            if let body = bodies[Self.key(size: snapshot.size, digest: digest)] {
                encryptor.progress?.add(bytes: snapshot.size)
                return (snapshot, body, true)
            }
        }
        let hasher = SHA256.Hasher()
        let (snapshot, body) = try encrypt(source, encryptor: encryptor, sink: sink, hasher: hasher)
        let key = Self.key(size: snapshot.size, digest: hasher.finalize())
        if bodies[key] == nil {
            bodies[key] = body
            storedSizes.insert(snapshot.size)
        }
        return (snapshot, body, false)
    }

    /// A new body for `source`. Its `first` is where the sink is now: right
    /// for an uncompressed body and for an empty one; a pipeline moves it to
    /// where the first chunk lands.
    private func encrypt(_ source: FileEncryptor.Source, encryptor: FileEncryptor, sink: ChunkSink,
                         hasher: SHA256.Hasher?) throws -> (FileEncryptor.Snapshot, FileBody) {
        let body = FileBody(first: sink.dataLength, fileID: try randomBytes(BundleFormat.idSize))
        return (try encryptor.encrypt(source, body: body, sink: sink, hasher: hasher), body)
    }

    private static func key(size: UInt64, digest: [UInt8]) -> [UInt8] {
        var key = digest
        key.appendLE(size)
        return key
    }
}
