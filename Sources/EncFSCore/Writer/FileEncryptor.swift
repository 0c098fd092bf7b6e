import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Encrypts one source file at a time, chunk by chunk, from a consistent
/// snapshot: the size read must match `fstat` at open, the file must not
/// grow past it, and its size and mtime must not change while it is read.
///
/// With a ``ChunkPipeline`` (compressed bundles), chunks are handed to it
/// as they are read: it compresses each on its own (a zstd frame when that
/// makes it shorter, raw otherwise) and seals them on every core, and
/// records them in the body's chunk table. Without one, chunks are sealed
/// here, one after the other, at fixed offsets.
final class FileEncryptor {
    struct Snapshot {
        var size: UInt64
        var mode: UInt16
        var mtimeSeconds: Int64
        var mtimeNanoseconds: UInt32
    }

    /// Where one source file is, and what the walk saw there.
    struct Source {
        var relativePath: [UInt8]
        /// The source directory, which `relativePath` is under.
        var root: FileDescriptor
        var displayPath: [UInt8]
        /// Device and inode the walk saw at this path; a different file
        /// there now (even through a swapped-in symlinked directory) is a
        /// source change.
        var identity: (device: UInt64, inode: UInt64)
        /// Its position among the files in pack order, for the prefetcher.
        var sequence = 0
    }

    /// Plaintext read per `read` call on the uncompressed path: whole
    /// chunks, so that a big file costs one system call per batch instead
    /// of one per chunk (an 8 KiB chunk per call was 131,072 calls per GiB).
    static let readBatchBytes = 256 << 10

    private let layout: ChunkLayout
    let keys: BundleKeys
    private let codec: ChunkCodec
    let pipeline: ChunkPipeline?
    /// Derives each file's key (once per stored file) with one HMAC
    /// context, re-keyed each time: no lookups inside OpenSSL per file.
    let keyDerivation: HMACSHA256Context
    /// Whole chunks of plaintext: ``readBatchBytes`` rounded down to the
    /// chunk size, at least one chunk (plus the byte that proves the end
    /// of a file).
    private let plaintext: UnsafeMutableRawBufferPointer
    private let chunksPerRead: UInt64
    /// Advanced by each chunk read (and by a whole file found already stored).
    let progress: WorkProgress?
    /// Told how far the packer has read, so it stays ahead.
    let prefetcher: SourcePrefetcher?

    /// - Parameters:
    ///   - pipeline: compresses and seals the chunks of a compressed
    ///     bundle; nil for an uncompressed one.
    ///   - progress: advanced as chunks are read.
    ///   - prefetcher: told the packer's position after every read.
    init(layout: ChunkLayout, keys: BundleKeys, pipeline: ChunkPipeline? = nil, progress: WorkProgress? = nil,
         prefetcher: SourcePrefetcher? = nil) throws {
        self.layout = layout
        self.keys = keys
        self.pipeline = pipeline
        self.progress = progress
        self.prefetcher = prefetcher
        codec = try ChunkCodec(bundleID: keys.bundleID)
        do { keyDerivation = try HMACSHA256Context() } catch { throw BundleError.crypto("cannot create an HMAC context") }
        chunksPerRead = max(1, UInt64(Self.readBatchBytes) / layout.chunkSize)
        plaintext = .allocate(byteCount: Int(chunksPerRead * layout.chunkSize) + 1, alignment: 4096)
        plaintext.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        SecureBytes.wipe(plaintext)
        plaintext.deallocate()
    }

    /// Encrypts `source` into `sink` as `body` (whose file id it takes).
    ///
    /// - Parameter hasher: when given, also hashes the plaintext (for
    ///   deduplication).
    /// - Returns: the snapshot; with a pipeline, `body` is complete only
    ///   once the pipeline has finished.
    func encrypt(_ source: Source, body: FileBody, sink: ChunkSink, hasher: SHA256.Hasher? = nil) throws -> Snapshot {
        let (file, before) = try open(source)
        let size = UInt64(max(before.st_size, 0))
        guard layout.isValidPlaintextSize(size) else { throw BundleError.limitExceeded("file larger than \(layout.maximumPlaintextSize) bytes") }
        let fileKey = try body.fileID.withUnsafeBytes { try keys.fileKey(fileID: $0, using: keyDerivation) }
        let chunks = layout.chunkCount(forPlaintextSize: size)
        var chunk: UInt64 = 0
        if let pipeline {
            while chunk < chunks {
                let want = Int(layout.plaintextRange(ofChunk: chunk, plaintextSize: size).count)
                let slot = try pipeline.acquire()
                let piece = UnsafeMutableRawBufferPointer(rebasing: slot.plaintext[0..<want])
                let got = try file.read(into: piece)
                guard got == want else { throw BundleError.sourceChanged(path: source.displayPath, what: "file shrank while it was read") }
                hasher?.update(UnsafeRawBufferPointer(piece))
                pipeline.submit(slot, body: body, key: fileKey, chunk: chunk, last: chunk + 1 == chunks, length: want)
                chunk += 1
                progress?.add(bytes: UInt64(want))
                prefetcher?.packerReached(file: source.sequence, offset: layout.plaintextRange(ofChunk: chunk, plaintextSize: size).lowerBound)
            }
        } else {
            try body.fileID.withUnsafeBytes { id in
                while chunk < chunks {
                    // Several chunks per read; each is then sealed on its own.
                    let batch = min(chunksPerRead, chunks - chunk)
                    let start = layout.plaintextRange(ofChunk: chunk, plaintextSize: size).lowerBound
                    let want = Int(layout.plaintextRange(ofChunk: chunk + batch - 1, plaintextSize: size).upperBound - start)
                    let got = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<want]))
                    guard got == want else { throw BundleError.sourceChanged(path: source.displayPath, what: "file shrank while it was read") }
                    hasher?.update(UnsafeRawBufferPointer(rebasing: plaintext[0..<want]))
                    prefetcher?.packerReached(file: source.sequence, offset: start + UInt64(want))
                    for _ in 0..<batch {
                        let range = layout.plaintextRange(ofChunk: chunk, plaintextSize: size)
                        let from = Int(range.lowerBound - start)
                        let piece = UnsafeRawBufferPointer(rebasing: plaintext[from..<(from + Int(range.count))])
                        let last = chunk + 1 == chunks
                        try sink.withSpace(piece.count + AESGCM.tagByteCount) { space in
                            try codec.seal(key: fileKey, fileID: id, chunk: chunk, last: last, plaintext: piece, into: space)
                        }
                        chunk += 1
                        progress?.add(bytes: UInt64(piece.count))
                    }
                }
            }
            body.recordUncompressed(sealedLength: layout.ciphertextSize(forPlaintextSize: size))
        }
        return try checkUnchanged(file, since: before, source: source)
    }

    /// Waits until every chunk handed to the pipeline is in the sink.
    func finish() throws {
        try pipeline?.finish()
    }

    /// Reads `source` through once and returns its SHA-256 (to find a body
    /// with the same contents), from the same kind of consistent snapshot
    /// as ``encrypt(_:fileID:sink:hasher:)``.
    func digest(_ source: Source) throws -> (snapshot: Snapshot, digest: [UInt8]) {
        let (file, before) = try open(source)
        let hasher = SHA256.Hasher()
        var remaining = UInt64(max(before.st_size, 0))
        while remaining > 0 {
            let want = Int(min(remaining, UInt64(plaintext.count - 1)))
            let piece = UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<want])
            let got = try file.read(into: piece)
            guard got == want else { throw BundleError.sourceChanged(path: source.displayPath, what: "file shrank while it was read") }
            hasher.update(UnsafeRawBufferPointer(piece))
            remaining -= UInt64(want)
        }
        SecureBytes.wipe(plaintext)
        prefetcher?.packerReached(file: source.sequence, offset: 0)
        return (try checkUnchanged(file, since: before, source: source), hasher.finalize())
    }

    /// Opens the source file and checks it is the regular file the walk saw.
    func open(_ source: Source) throws -> (FileDescriptor, stat) {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(source.relativePath, in: source.root, flags: O_RDONLY | O_NOFOLLOW, shown: source.displayPath)
        } catch {
            if error.errno == ENOENT { throw BundleError.sourceChanged(path: source.displayPath, what: "file was removed") }
            // O_NOFOLLOW refuses a symlink with ELOOP: the walk saw a regular file here.
            if error.errno == ELOOP { throw BundleError.sourceChanged(path: source.displayPath, what: "file was replaced by a symlink") }
            throw error
        }
        let before = try file.status()
        guard before.st_mode & S_IFMT == S_IFREG else {
            throw BundleError.sourceChanged(path: source.displayPath, what: "no longer a regular file")
        }
        guard UInt64(before.st_dev) == source.identity.device, UInt64(before.st_ino) == source.identity.inode else {
            throw BundleError.sourceChanged(path: source.displayPath, what: "file was replaced")
        }
        return (file, before)
    }

    /// One more byte must not exist, and size and mtime must be unchanged.
    func checkUnchanged(_ file: FileDescriptor, since before: stat, source: Source) throws -> Snapshot {
        let extra = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<1]))
        let after = try file.status()
        guard extra == 0, after.st_size == before.st_size, after.st_mtim.tv_sec == before.st_mtim.tv_sec,
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec else {
            throw BundleError.sourceChanged(path: source.displayPath, what: "file was modified while it was read")
        }
        return Snapshot(size: UInt64(max(before.st_size, 0)), mode: UInt16(before.st_mode & 0o7777),
                        mtimeSeconds: Int64(before.st_mtim.tv_sec), mtimeNanoseconds: UInt32(before.st_mtim.tv_nsec))
    }
}
