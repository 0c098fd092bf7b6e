import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Reads an unlocked bundle: the index, and file contents chunk by chunk.
///
/// All state is immutable except the workspace pool, which sits behind a
/// `Mutex`; `read` may be called from many threads at once. The bundle is
/// read with `pread` on one shared descriptor.
public final class BundleReader: Sendable {
    /// The authenticated header.
    public let header: BundleHeader
    /// The authenticated, validated index.
    public let index: BundleIndex
    /// Keys derived from the content key.
    public let keys: BundleKeys
    /// Bundle size in bytes.
    public let bundleSize: UInt64
    private let fd: Int32
    private let path: [UInt8]
    private let pool = Mutex<[ChunkWorkspace]>([])

    private init(fd: Int32, path: [UInt8], header: BundleHeader, index: BundleIndex, keys: BundleKeys, size: UInt64) {
        self.fd = fd
        self.path = path
        self.header = header
        self.index = index
        self.keys = keys
        self.bundleSize = size
    }

    deinit { close(fd) }

    /// Opens a bundle with whichever of `materials` opens a slot.
    ///
    /// - Throws: `BundleError` (not a bundle, unsupported version, wrong key,
    ///   corrupted header or index, length mismatch, I/O).
    public static func open(path: [UInt8], materials: [KeyMaterial],
                            indexCacheBytes: Int = IndexPages.defaultCacheBytes) throws -> BundleReader {
        try open(path: path, indexCacheBytes: indexCacheBytes) { header in try header.unlock(with: materials) }
    }

    /// Opens a bundle with a known content key (the mount daemon gets it
    /// from the process that verified the user's secret).
    public static func open(path: [UInt8], contentKey: SymmetricKey,
                            indexCacheBytes: Int = IndexPages.defaultCacheBytes) throws -> BundleReader {
        try open(path: path, indexCacheBytes: indexCacheBytes) { header in try header.authenticate(contentKey: contentKey) }
    }

    /// Opens the bundle file and unlocks its header with whichever of
    /// `materials` opens a slot, without reading the index: what the mount
    /// launcher needs to hand the bundle to its daemon, which loads and
    /// checks the index itself (once, instead of in both processes).
    ///
    /// - Returns: the open file (close-on-exec; the caller closes it) and
    ///   the bundle's keys.
    /// - Throws: `BundleError` (not a bundle, unsupported version, wrong key,
    ///   corrupted header, length mismatch, I/O).
    public static func unlock(path: [UInt8], materials: [KeyMaterial]) throws -> (descriptor: Int32, keys: BundleKeys) {
        let fd = try openBundleFile(path)
        do {
            return (fd, try authenticate(fd: fd, path: path) { header in try header.unlock(with: materials) }.keys)
        } catch {
            close(fd)
            throw error
        }
    }

    /// Reads and parses only the unauthenticated header (for tools that
    /// show slot kinds without a key).
    public static func readHeader(path: [UInt8]) throws -> (header: BundleHeader, fileSize: UInt64) {
        let fd = try openBundleFile(path)
        defer { close(fd) }
        return try readHeader(fd: fd, path: path)
    }

    private static func openBundleFile(_ path: [UInt8]) throws -> Int32 {
        let fd = path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw BundleError.lastIO("open bundle", path) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            close(fd)
            throw BundleError.lastIO("stat bundle", path)
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw BundleError.io(errno: EINVAL, operation: "open bundle (not a regular file)", path: path)
        }
        return fd
    }

    private static func readHeader(fd: Int32, path: [UInt8]) throws -> (header: BundleHeader, fileSize: UInt64) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw BundleError.lastIO("stat bundle", path) }
        let fileSize = UInt64(max(st.st_size, 0))
        var prefix = [UInt8](repeating: 0, count: 16)
        let got = try prefix.withUnsafeMutableBytes { try FileIO.preadFull(fd, into: $0, at: 0, path: path) }
        guard got == 16 else { throw BundleError.notABundle }
        let length = try prefix.withUnsafeBytes { try BundleHeader.headerLength(fromPrefix: $0) }
        guard UInt64(length) <= fileSize else { throw BundleError.corruptHeader("file is shorter than its header") }
        var bytes = [UInt8](repeating: 0, count: length)
        let n = try bytes.withUnsafeMutableBytes { try FileIO.preadFull(fd, into: $0, at: 0, path: path) }
        guard n == length else { throw BundleError.corruptHeader("file is shorter than its header") }
        return (try bytes.withUnsafeBytes { try BundleHeader.parse($0) }, fileSize)
    }

    /// Opens an already open bundle file with a known content key. The
    /// mount daemon receives the descriptor its parent verified, so a file
    /// swapped in at the path meanwhile cannot take its place. The reader
    /// takes ownership of `descriptor` (closed on failure and in `deinit`).
    ///
    /// - Parameters:
    ///   - path: used in messages only.
    ///   - indexCacheBytes: memory for decrypted index pages (at least
    ///     `IndexPages.minimumCacheBytes`).
    public static func open(descriptor: Int32, path: [UInt8], contentKey: SymmetricKey,
                            indexCacheBytes: Int = IndexPages.defaultCacheBytes) throws -> BundleReader {
        try open(fd: descriptor, path: path, indexCacheBytes: indexCacheBytes) { header in
            try header.authenticate(contentKey: contentKey)
        }
    }

    private static func open(path: [UInt8], indexCacheBytes: Int, unlock: (BundleHeader) throws -> BundleKeys) throws -> BundleReader {
        try open(fd: try openBundleFile(path), path: path, indexCacheBytes: indexCacheBytes, unlock: unlock)
    }

    private static func open(fd: Int32, path: [UInt8], indexCacheBytes: Int,
                             unlock: (BundleHeader) throws -> BundleKeys) throws -> BundleReader {
        do {
            let (header, keys, fileSize) = try authenticate(fd: fd, path: path, unlock: unlock)
            let index = try readIndex(fd: fd, path: path, header: header, keys: keys, cacheBytes: indexCacheBytes)
            return BundleReader(fd: fd, path: path, header: header, index: index, keys: keys, size: fileSize)
        } catch {
            close(fd)
            throw error
        }
    }

    /// Reads the header, unlocks it and checks the file's length.
    private static func authenticate(fd: Int32, path: [UInt8], unlock: (BundleHeader) throws -> BundleKeys) throws
        -> (header: BundleHeader, keys: BundleKeys, fileSize: UInt64) {
        let (header, fileSize) = try readHeader(fd: fd, path: path)
        let keys = try unlock(header)
        guard fileSize == header.bundleLength else {
            throw BundleError.lengthMismatch(expected: header.bundleLength, actual: fileSize)
        }
        return (header, keys, fileSize)
    }

    private static func readIndex(fd: Int32, path: [UInt8], header: BundleHeader, keys: BundleKeys,
                                  cacheBytes: Int) throws -> BundleIndex {
        // Sizes were bounded by the authenticated header and the file size
        // (the header parser checked indexLength ≥ the tag size).
        let plainLength = Int(header.indexLength) - AESGCM.tagByteCount
        let start = UInt64(header.headerLength) + header.indexOffset
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        let gotTag = try tag.withUnsafeMutableBytes { try FileIO.preadFull(fd, into: $0, at: start + UInt64(plainLength), path: path) }
        guard gotTag == tag.count else { throw BundleError.corruptIndex("index is truncated") }
        // The plaintext is never held whole: see IndexPages.
        let pages = try tag.withUnsafeBytes { t in
            try IndexPages.sealed(descriptor: fd, path: path, start: start, length: plainLength, tag: t,
                                  key: keys.indexKey, nonce: IndexBuilder.zeroNonce,
                                  aad: IndexBuilder.associatedData(header), cacheBytes: cacheBytes)
        }
        return try BundleIndex(pages: pages, layout: header.layout, dataLength: header.indexOffset)
    }

    // MARK: - Reading files

    /// The key of a file entry's chunks (derive once per open file).
    ///
    /// - Throws: `BundleError.isADirectory` for non-files, `.crypto`.
    public func fileKey(for entry: IndexEntry) throws -> SymmetricKey {
        guard entry.kind == .file else { throw BundleError.isADirectory }
        return try entry.withFileID { try keys.fileKey(fileID: $0) }
    }

    /// Reads plaintext of `entry` starting at `offset` into `buffer`,
    /// decrypting only the chunks the range covers.
    ///
    /// Whole chunks are decrypted straight into `buffer`; partly covered
    /// ones into a pooled workspace, from which only the requested bytes are
    /// copied. Nothing is released before its chunk has authenticated.
    ///
    /// - Parameters:
    ///   - entry: a file entry.
    ///   - key: its key from ``fileKey(for:)``.
    ///   - offset: plaintext offset; at or past the end reads 0 bytes.
    ///   - buffer: receives the bytes.
    /// - Returns: `buffer.count`, or fewer only at end of file.
    /// - Throws: `BundleError.corruptChunk` (the buffer is then wiped),
    ///   `.io`.
    public func read(_ entry: IndexEntry, key: SymmetricKey, fromOffset offset: UInt64,
                     into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        try readChunks(entry, key: key, fromOffset: offset, into: buffer)
    }

    /// Reads plaintext of `entry` like ``read(_:key:fromOffset:into:)``,
    /// finding the file's key in the pooled workspace's small cache (derived
    /// there on a miss), so callers keep no per-file state.
    ///
    /// - Throws: `BundleError.isADirectory` for non-files,
    ///   `.corruptChunk` (the buffer is then wiped), `.crypto`, `.io`.
    public func read(_ entry: IndexEntry, fromOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        try readChunks(entry, key: nil, fromOffset: offset, into: buffer)
    }

    /// Reads like ``read(_:fromOffset:into:)`` with the caller's own
    /// workspace (from ``makeWorkspace()``), which no other thread may use
    /// meanwhile: the mount keeps one per worker thread, so reads take no
    /// lock at all.
    func read(_ entry: IndexEntry, fromOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer,
              using workspace: ChunkWorkspace) throws -> Int {
        try readChunks(entry, key: nil, fromOffset: offset, into: buffer, workspace: workspace)
    }

    /// A workspace for ``read(_:fromOffset:into:using:)``.
    ///
    /// - Throws: `BundleError.crypto` when OpenSSL cannot allocate a context.
    func makeWorkspace() throws -> ChunkWorkspace {
        try ChunkWorkspace(layout: header.layout, bundleID: header.bundleID)
    }

    private func readChunks(_ entry: IndexEntry, key givenKey: SymmetricKey?, fromOffset offset: UInt64,
                            into buffer: UnsafeMutableRawBufferPointer, workspace given: ChunkWorkspace? = nil) throws -> Int {
        guard entry.kind == .file else { throw BundleError.isADirectory }
        let size = entry.size
        guard offset < size, buffer.count > 0 else { return 0 }
        let end = UInt64(buffer.count) >= size - offset ? size : offset + UInt64(buffer.count)
        let layout = header.layout
        let chunks = layout.chunks(coveringPlaintextOffset: offset, count: end - offset, plaintextSize: size)
        let workspace = try given ?? takeWorkspace()
        defer { if given == nil { returnWorkspace(workspace) } }
        let bodyStart = UInt64(header.headerLength) + entry.first
        do {
            let key = try givenKey ?? workspace.fileKey(for: entry, keys: keys)
            try entry.withFileID { fileID in
                // The sealed chunks fetched last: batch.lowerBound's bytes
                // start at workspace.sealed[0].
                var batch: Range<UInt64> = chunks.lowerBound..<chunks.lowerBound
                for chunk in chunks {
                    if chunk >= batch.upperBound {
                        batch = chunk..<min(chunks.upperBound, chunk + UInt64(workspace.batchChunks))
                        let bytes = layout.ciphertextRange(ofChunks: batch, plaintextSize: size)
                        let want = Int(bytes.count)
                        let got = try FileIO.preadFull(fd, into: UnsafeMutableRawBufferPointer(rebasing: workspace.sealed[0..<want]),
                                                       at: bodyStart + bytes.lowerBound, path: path)
                        // A short read means the bundle ends early: name the
                        // first chunk it cut.
                        guard got == want else {
                            throw BundleError.corruptChunk(entry: entry.position, chunk: chunk + UInt64(got) / layout.sealedChunkSize)
                        }
                    }
                    let range = layout.plaintextRange(ofChunk: chunk, plaintextSize: size)
                    let sealedCount = range.count + Int(ChunkLayout.overhead)
                    let sealedStart = Int(layout.ciphertextOffset(ofChunk: chunk) - layout.ciphertextOffset(ofChunk: batch.lowerBound))
                    let sealed = UnsafeMutableRawBufferPointer(rebasing: workspace.sealed[sealedStart..<(sealedStart + sealedCount)])
                    let last = layout.isLastChunk(chunk, plaintextSize: size)
                    let wanted = max(range.lowerBound, offset)..<min(range.upperBound, end)
                    let destination = Int(wanted.lowerBound - offset)
                    if wanted == range {
                        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[destination..<(destination + range.count)])
                        guard try workspace.codec.open(key: key, fileID: fileID, chunk: chunk, last: last,
                                                       sealed: UnsafeRawBufferPointer(sealed), into: target) else {
                            throw BundleError.corruptChunk(entry: entry.position, chunk: chunk)
                        }
                    } else {
                        let plain = UnsafeMutableRawBufferPointer(rebasing: workspace.plaintext[0..<range.count])
                        guard try workspace.codec.open(key: key, fileID: fileID, chunk: chunk, last: last,
                                                       sealed: UnsafeRawBufferPointer(sealed), into: plain) else {
                            throw BundleError.corruptChunk(entry: entry.position, chunk: chunk)
                        }
                        let from = Int(wanted.lowerBound - range.lowerBound)
                        UnsafeMutableRawBufferPointer(rebasing: buffer[destination..<(destination + wanted.count)])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: plain[from..<(from + wanted.count)]))
                    }
                }
            }
        } catch {
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(end - offset)]))
            throw error
        }
        return Int(end - offset)
    }

    /// Whether the file this reader has open is the one with `device` and
    /// `inode` (the rekeyer checks it still reads the file it replaces).
    func isBundleFile(device: dev_t, inode: ino_t) -> Bool {
        var st = stat()
        return fstat(fd, &st) == 0 && st.st_dev == device && st.st_ino == inode
    }

    /// Copies the payload (chunk data and sealed index) byte for byte to
    /// `output` at `offset`, 1 MiB at a time. (`copy_file_range` would keep
    /// the copy in the kernel, but Glibc only declares it under _GNU_SOURCE,
    /// which Swift's Glibc module does not set.)
    ///
    /// - Throws: `BundleError.io`.
    func copyPayload(to output: Int32, at offset: UInt64, path: [UInt8]) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var source = UInt64(header.headerLength)
        var destination = offset
        var remaining = header.payloadLength
        while remaining > 0 {
            let want = Int(min(remaining, UInt64(buffer.count)))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
            let got = try FileIO.preadFull(fd, into: chunk, at: source, path: path)
            guard got == want else { throw BundleError.lengthMismatch(expected: header.bundleLength, actual: source + UInt64(got)) }
            try FileIO.pwriteAll(output, UnsafeRawBufferPointer(chunk), at: destination, path: path)
            source += UInt64(want)
            destination += UInt64(want)
            remaining -= UInt64(want)
        }
    }

    private func takeWorkspace() throws -> ChunkWorkspace {
        if let workspace = pool.withLock({ $0.popLast() }) { return workspace }
        return try makeWorkspace()
    }

    private func returnWorkspace(_ workspace: ChunkWorkspace) {
        pool.withLock { $0.append(workspace) }
    }
}
