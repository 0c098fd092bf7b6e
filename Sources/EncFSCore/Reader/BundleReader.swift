import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Reads an unlocked bundle: the index, and file contents chunk by chunk.
///
/// All state is immutable except the workspace pool, which sits behind a
/// `Mutex`; `read` may be called from many threads at once. The bytes come
/// from a ``ByteSource`` (a local file, memory, a remote object), read
/// positionally into the reader's own buffers.
package final class BundleReader: Sendable {
    /// The authenticated header.
    package let header: BundleHeader
    /// The authenticated, validated index.
    package let index: BundleIndex
    /// Keys derived from the content key.
    package let keys: BundleKeys
    /// Bundle size in bytes.
    package let bundleSize: UInt64
    /// Where the bundle's bytes come from.
    package let source: any ByteSource
    private let pool = Mutex<[ChunkWorkspace]>([])
    /// Sealed chunks one `pread` fetches: what a workspace's sealed buffer
    /// holds (both follow ``ChunkWorkspace/batchBytes``). Fragment units
    /// are fetched one at a time, each into a fetch buffer of the unit
    /// cache.
    private let batchChunks: Int
    /// The fragment units reads opened lately, shared by every thread
    /// (nil without fragments). Every read of a fragment goes through it.
    let fragmentUnits: FragmentUnitCache?

    private init(source: any ByteSource, header: BundleHeader, index: BundleIndex, keys: BundleKeys) {
        self.source = source
        self.header = header
        self.index = index
        self.keys = keys
        self.bundleSize = source.size
        self.batchChunks = header.layout.chunksPerBatch(batchBytes: ChunkWorkspace.batchBytes)
        let units = header.fragmentLayout
        self.fragmentUnits = header.features.hasFragments
            ? FragmentUnitCache(unitSize: Int(units.chunkSize), sealedUnitSize: Int(units.sealedChunkSize)) : nil
    }

    /// Opens a bundle with whichever of `materials` opens a slot.
    ///
    /// - Parameter options: the scrypt memory a passphrase slot may need,
    ///   whether symlinks may lead outside the bundle (by default 1 GiB, and
    ///   no), and what the bundle's origin must be (`OpenOptions.origin`: a
    ///   signer, a bundle id; checked before anything of the index is used).
    /// - Throws: `BundleError` (not a bundle, unsupported version, wrong key,
    ///   scrypt memory over the limit, corrupted header or index, a symlink
    ///   leading outside, length mismatch, I/O; not signed, signed by
    ///   another key, bad signature, another bundle id when the origin
    ///   requires).
    package static func open(source: any ByteSource, materials: [KeyMaterial],
                            indexCacheBytes: Int = IndexPages.defaultCacheBytes,
                            options: OpenOptions = OpenOptions()) throws -> BundleReader {
        try open(source: source, indexCacheBytes: indexCacheBytes, options: options) { header in
            try header.unlock(with: materials, scryptMemoryLimit: options.scryptMemoryLimit)
        }
    }

    /// Opens the bundle file at `path` with whichever of `materials` opens a slot.
    package static func open(path: [UInt8], materials: [KeyMaterial],
                            indexCacheBytes: Int = IndexPages.defaultCacheBytes,
                            options: OpenOptions = OpenOptions()) throws -> BundleReader {
        try open(source: try FileByteSource(path: path), materials: materials, indexCacheBytes: indexCacheBytes, options: options)
    }

    /// Opens a bundle with a known content key (the mount daemon gets it
    /// from the process that verified the user's secret, together with the
    /// very file that process verified, and checks the origin again itself).
    package static func open(source: any ByteSource, contentKey: SymmetricKey,
                             indexCacheBytes: Int = IndexPages.defaultCacheBytes,
                             options: OpenOptions = OpenOptions()) throws -> BundleReader {
        try open(source: source, indexCacheBytes: indexCacheBytes, options: options) { header in
            try header.authenticate(contentKey: contentKey)
        }
    }

    /// Opens the bundle file at `path` with a known content key.
    package static func open(path: [UInt8], contentKey: SymmetricKey,
                             indexCacheBytes: Int = IndexPages.defaultCacheBytes,
                             options: OpenOptions = OpenOptions()) throws -> BundleReader {
        try open(source: try FileByteSource(path: path), contentKey: contentKey, indexCacheBytes: indexCacheBytes, options: options)
    }

    /// Unlocks the header of `source` with whichever of `materials` opens a
    /// slot, without reading the index: what the mount launcher needs to
    /// hand the bundle to its daemon, which loads and checks the index
    /// itself (once, instead of in both processes).
    ///
    /// Of `options.origin`, what needs no index is checked here (bundle id,
    /// signer, content key against the signed commitment), so a forged
    /// bundle is refused before a daemon starts; the daemon checks all of it
    /// again.
    ///
    /// - Parameter options: its scrypt memory limit and origin (symlinks are
    ///   in the index, which the daemon checks).
    /// - Returns: the bundle's keys.
    /// - Throws: `BundleError` (not a bundle, unsupported version, wrong key,
    ///   scrypt memory over the limit, corrupted header, length mismatch, I/O,
    ///   and the origin's refusals).
    package static func unlock(source: any ByteSource, materials: [KeyMaterial],
                               options: OpenOptions = OpenOptions()) throws -> BundleKeys {
        try authenticate(source: source, origin: options.origin) { header in
            try header.unlock(with: materials, scryptMemoryLimit: options.scryptMemoryLimit)
        }.keys
    }

    /// Reads and parses only the unauthenticated header (for tools that
    /// show slot kinds without a key).
    package static func readHeader(source: any ByteSource) throws -> (header: BundleHeader, fileSize: UInt64) {
        var prefix = [UInt8](repeating: 0, count: 16)
        let got = try prefix.withUnsafeMutableBytes { try source.read(into: $0, atOffset: 0) }
        guard got == 16 else { throw BundleError.notABundle }
        let length = try prefix.withUnsafeBytes { try BundleHeader.headerLength(fromPrefix: $0) }
        guard UInt64(length) <= source.size else { throw BundleError.corruptHeader("file is shorter than its header") }
        var bytes = [UInt8](repeating: 0, count: length)
        let n = try bytes.withUnsafeMutableBytes { try source.read(into: $0, atOffset: 0) }
        guard n == length else { throw BundleError.corruptHeader("file is shorter than its header") }
        return (try bytes.withUnsafeBytes { try BundleHeader.parse($0) }, source.size)
    }

    /// Reads and parses only the unauthenticated header of the file at `path`.
    package static func readHeader(path: [UInt8]) throws -> (header: BundleHeader, fileSize: UInt64) {
        try readHeader(source: try FileByteSource(path: path))
    }

    private static func open(source: any ByteSource, indexCacheBytes: Int, options: OpenOptions,
                             unlock: (BundleHeader) throws -> BundleKeys) throws -> BundleReader {
        let (header, keys, signature) = try authenticate(source: source, origin: options.origin, unlock: unlock)
        // The sealed index is hashed only when a signature must be checked
        // (a paged index would otherwise be read whole for nothing).
        let checkDigest: (([UInt8]) throws -> Void)? = signature.map { signature in
            { indexDigest in try options.origin.checkSignature(signature, header: header, indexDigest: indexDigest) }
        }
        let index = try readIndex(source: source, header: header, keys: keys, cacheBytes: indexCacheBytes, checkDigest: checkDigest)
        if !options.allowsExternalSymlinks { try index.refuseExternalSymlinks() }
        return BundleReader(source: source, header: header, index: index, keys: keys)
    }

    /// Reads the header, checks what `origin` can check before a key is
    /// tried, unlocks it, checks the content key against a required
    /// signature and the source's length.
    ///
    /// - Returns: also the signature still to be checked, when required.
    private static func authenticate(source: any ByteSource, origin: OriginPolicy,
                                     unlock: (BundleHeader) throws -> BundleKeys) throws
        -> (header: BundleHeader, keys: BundleKeys, signature: BundleSignature?) {
        let (header, size) = try readHeader(source: source)
        let signature = try origin.checkHeader(header)
        let keys = try unlock(header)
        try origin.checkKeys(keys, against: signature)
        guard size == header.bundleLength else {
            throw BundleError.lengthMismatch(expected: header.bundleLength, actual: size)
        }
        return (header, keys, signature)
    }

    /// SHA-256 of the sealed index (ciphertext ‖ tag) as stored, read in
    /// 1 MiB pieces: what a signature covers, for tools that check one
    /// without a key. `header` is unauthenticated, but its parser checked
    /// that the index lies within the payload it records.
    ///
    /// - Throws: `BundleError.lengthMismatch` when the source is not as
    ///   long as the header says, `.io`.
    package static func sealedIndexDigest(source: any ByteSource, header: BundleHeader) throws -> [UInt8] {
        guard source.size == header.bundleLength else {
            throw BundleError.lengthMismatch(expected: header.bundleLength, actual: source.size)
        }
        let hasher = SHA256.Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        let start = UInt64(header.headerLength) + header.indexOffset
        var done: UInt64 = 0
        while done < header.indexLength {
            let want = Int(min(header.indexLength - done, UInt64(buffer.count)))
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
            let got = try source.read(into: piece, atOffset: start + done)
            guard got == want else { throw BundleError.lengthMismatch(expected: header.bundleLength, actual: start + done + UInt64(got)) }
            hasher.update(UnsafeRawBufferPointer(piece))
            done += UInt64(want)
        }
        return hasher.finalize()
    }

    /// Reads, authenticates and validates the index.
    ///
    /// - Parameter checkDigest: when given, gets the SHA-256 of the sealed
    ///   index, hashed while it is read, after its tag has verified and
    ///   before anything in it is parsed; throwing refuses the bundle.
    ///
    /// An index that fails is read once more when the source may give
    /// other bytes (a remote bundle's cached copy, dropped by
    /// `discardCopies`), as a chunk is: a damaged cache file then costs a
    /// fetch, not the mount.
    private static func readIndex(source: any ByteSource, header: BundleHeader, keys: BundleKeys, cacheBytes: Int,
                                  checkDigest: (([UInt8]) throws -> Void)? = nil) throws -> BundleIndex {
        do {
            return try readIndexOnce(source: source, header: header, keys: keys, cacheBytes: cacheBytes, checkDigest: checkDigest)
        } catch {
            guard case BundleError.corruptIndex = error,
                  source.discardCopies(atOffset: UInt64(header.headerLength) + header.indexOffset,
                                       count: Int(clamping: header.indexLength)) else { throw error }
            return try readIndexOnce(source: source, header: header, keys: keys, cacheBytes: cacheBytes, checkDigest: checkDigest)
        }
    }

    private static func readIndexOnce(source: any ByteSource, header: BundleHeader, keys: BundleKeys, cacheBytes: Int,
                                      checkDigest: (([UInt8]) throws -> Void)?) throws -> BundleIndex {
        if header.features.hasPagedIndex {
            return try readPagedIndex(source: source, header: header, keys: keys, cacheBytes: cacheBytes, checkDigest: checkDigest)
        }
        // Sizes were bounded by the authenticated header and the file size
        // (the header parser checked indexLength ≥ the tag size).
        let plainLength = Int(header.indexLength) - AESGCM.tagByteCount
        let start = UInt64(header.headerLength) + header.indexOffset
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        let gotTag = try tag.withUnsafeMutableBytes { try source.read(into: $0, atOffset: start + UInt64(plainLength)) }
        guard gotTag == tag.count else { throw BundleError.corruptIndex("index is truncated") }
        let hasher = checkDigest == nil ? nil : SHA256.Hasher()
        // The plaintext is never held whole: see IndexPages.
        let pages = try tag.withUnsafeBytes { t in
            try IndexPages.sealed(source: source, start: start, length: plainLength, tag: t,
                                  key: keys.indexKey, nonce: IndexBuilder.zeroNonce,
                                  aad: IndexBuilder.associatedData(header), cacheBytes: cacheBytes, hashing: hasher)
        }
        if let checkDigest, let hasher {
            tag.withUnsafeBytes { hasher.update($0) }
            try checkDigest(hasher.finalize())
        }
        return try BundleIndex(pages: pages, layout: header.layout, dataLength: header.indexOffset, features: header.features)
    }

    /// Opens a paged index: page 0 only (see `PagedIndexStore`). A
    /// required signature covers the whole sealed index, so it is hashed
    /// first, as it is stored, before page 0 is opened.
    private static func readPagedIndex(source: any ByteSource, header: BundleHeader, keys: BundleKeys, cacheBytes: Int,
                                       checkDigest: (([UInt8]) throws -> Void)?) throws -> BundleIndex {
        if let checkDigest { try checkDigest(try sealedIndexDigest(source: source, header: header)) }
        let store = try PagedIndexStore.open(source: source, start: UInt64(header.headerLength) + header.indexOffset,
                                             length: header.indexLength, headLength: header.features.pagedIndexHeadLength,
                                             key: keys.indexKey, baseAAD: IndexBuilder.associatedData(header),
                                             layout: header.layout, dataLength: header.indexOffset, features: header.features,
                                             cacheBytes: cacheBytes)
        return BundleIndex(paged: store, layout: header.layout, dataLength: header.indexOffset, features: header.features)
    }

    // MARK: - Reading files

    /// The key of a file entry's chunks (derive once per open file).
    ///
    /// - Throws: `BundleError.isADirectory` for non-files, `.crypto`.
    package func fileKey(for entry: IndexEntry) throws -> SymmetricKey {
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
    package func read(_ entry: IndexEntry, key: SymmetricKey, fromOffset offset: UInt64,
                     into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        try readFile(entry, key: key, fromOffset: offset, into: buffer)
    }

    /// Reads plaintext of `entry` like ``read(_:key:fromOffset:into:)``,
    /// finding the file's key in the pooled workspace's small cache (derived
    /// there on a miss), so callers keep no per-file state.
    ///
    /// - Throws: `BundleError.isADirectory` for non-files,
    ///   `.corruptChunk` (the buffer is then wiped), `.crypto`, `.io`.
    package func read(_ entry: IndexEntry, fromOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        try readFile(entry, key: nil, fromOffset: offset, into: buffer)
    }

    /// Reads like ``read(_:fromOffset:into:)`` with the caller's own
    /// workspace (from ``makeWorkspace()``), which no other thread may use
    /// meanwhile: the mount keeps one per worker thread, so reads take no
    /// lock at all.
    package func read(_ entry: IndexEntry, fromOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer,
              using workspace: ChunkWorkspace) throws -> Int {
        try readFile(entry, key: nil, fromOffset: offset, into: buffer, workspace: workspace)
    }

    /// A workspace for ``read(_:fromOffset:into:using:)``.
    ///
    /// - Throws: `BundleError.crypto` when OpenSSL cannot allocate a context.
    package func makeWorkspace() throws -> ChunkWorkspace {
        try ChunkWorkspace(layout: header.layout, bundleID: header.bundleID, compressed: header.features.isCompressed,
                           forReader: true)
    }

    /// Reads a fragment slice as the bytes `sliceOffset + offset …` of its
    /// fragment, cut at the slice's end (the fragment's chunk is opened
    /// once and kept in the workspace's cache of inflated chunks, so the
    /// next slice of it costs a copy); any other file as itself.
    @inline(__always)
    private func readFile(_ entry: IndexEntry, key: SymmetricKey?, fromOffset offset: UInt64,
                          into buffer: UnsafeMutableRawBufferPointer, workspace given: ChunkWorkspace? = nil) throws -> Int {
        guard entry.isFragmentSlice else {
            return try readChunks(entry, key: key, fromOffset: offset, into: buffer, workspace: given)
        }
        guard offset < entry.fileSize else { return 0 }
        let (fragment, start) = try index.body(of: entry)
        let count = Int(min(UInt64(buffer.count), entry.fileSize - offset))
        let workspace = try given ?? takeWorkspace()
        defer { if given == nil { returnWorkspace(workspace) } }
        // The slice's key is its fragment's (one id): derived and cached
        // under the slice's own entry, which the mount finds there again
        // (``ChunkWorkspace/cachedEntry(at:)``), never the fragment's.
        let key = try key ?? workspace.fileKey(for: entry, keys: keys)
        return try readChunks(fragment, key: key, fromOffset: start + offset,
                              into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), workspace: workspace)
    }

    /// What every step of one read needs, gathered once per read: the
    /// file, its key and id, the workspace and the caller's buffer.
    ///
    /// A plain struct of references and pointers, passed by value to
    /// inlined functions: it lives in registers or on the stack, never on
    /// the heap.
    private struct ReadContext {
        /// The file entry read.
        let entry: IndexEntry
        /// Its chunk key.
        let key: SymmetricKey
        /// Its file id (part of each chunk's nonce), valid for the read.
        let fileID: UnsafeRawBufferPointer
        /// The buffers and cipher context of this read (one thread's).
        let workspace: ChunkWorkspace
        /// The caller's buffer: receives the plaintext.
        let buffer: UnsafeMutableRawBufferPointer
        /// The entry's chunk layout: a fragment's units, or the chunks.
        let layout: ChunkLayout
    }

    /// Fetches, opens and copies the chunks of one read; the read plan
    /// says which bytes go where, so this function does no offset
    /// arithmetic of its own.
    ///
    /// Inlined into each `read` entry point: a 4 KiB read is short enough
    /// that the extra call frame showed in instruction counts.
    @inline(__always)
    private func readChunks(_ entry: IndexEntry, key givenKey: SymmetricKey?, fromOffset offset: UInt64,
                            into buffer: UnsafeMutableRawBufferPointer, workspace given: ChunkWorkspace? = nil) throws -> Int {
        guard entry.kind == .file else { throw BundleError.isADirectory }
        // The index bounded entry.payloadOffset and the sealed body by the payload,
        // and the header the payload by the file size: the sum cannot wrap.
        let layout = index.layout(of: entry)
        let plan = layout.readPlan(forPlaintextOffset: offset, count: buffer.count, plaintextSize: entry.fileSize,
                                   bodyOffset: UInt64(header.headerLength) + entry.payloadOffset,
                                   chunksPerBatch: entry.isFragmentBody ? 1 : batchChunks)
        guard !plan.isEmpty else { return 0 }
        let workspace = try given ?? takeWorkspace()
        defer { if given == nil { returnWorkspace(workspace) } }
        do {
            let key = try givenKey ?? workspace.fileKey(for: entry, keys: keys)
            try entry.withFileID { fileID in
                let context = ReadContext(entry: entry, key: key, fileID: fileID, workspace: workspace, buffer: buffer,
                                          layout: layout)
                for batch in plan {
                    if entry.isFragmentBody {
                        // Only a bundle with fragments has fragment bodies
                        // (``BundleIndex/body(of:)``).
                        guard let units = fragmentUnits else { preconditionFailure("internal error: a fragment without a unit cache") }
                        try readThroughUnitCache(batch, units: units, in: context)
                        continue
                    }
                    // Part of a chunk this worker inflated lately: no fetch.
                    if let cache = workspace.inflated, serveFromCache(batch, cache: cache, in: context) {
                        continue
                    }
                    try readBatch(batch, in: context, fetchingInto: workspace.sealed)
                }
            }
        } catch {
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<plan.byteCount]))
            throw error
        }
        return plan.byteCount
    }

    /// Fetches one batch of chunks with one read of the source and opens
    /// each of its chunks into the context's buffer.
    ///
    /// A source that keeps copies (a remote bundle's cache) gets one more
    /// read of a batch whose chunk failed, after dropping the copies of
    /// that chunk's sealed bytes only (a batch may span stored units that
    /// are sound).
    ///
    /// - Throws: `BundleError.corruptChunk` for a short read or a chunk
    ///   that does not open (twice, when the source kept copies), `.io`,
    ///   `.crypto`.
    /// - Parameter fetchBuffer: receives the sealed bytes; its zstd frames
    ///   are opened there in place.
    /// - Parameter unit: where the chunk is opened instead of the
    ///   workspace's buffers or the caller's (a slot of
    ///   ``FragmentUnitCache``).
    @inline(__always)
    private func readBatch(_ batch: ChunkReadPlan.Batch, in context: ReadContext,
                           fetchingInto fetchBuffer: UnsafeMutableRawBufferPointer,
                           openingInto unit: UnsafeMutableRawBufferPointer? = nil) throws {
        // A compressed file's batch lies where its chunk table says; the
        // chunks are the same, so it fits the buffer.
        let window = context.entry.hasChunkTable
            ? try index.chunkTableWindow(of: context.entry, chunks: batch.chunks, into: context.workspace.tableEntries) : nil
        let (sourceOffset, byteCount) = window.map { context.layout.storedBatch(batch, in: $0) }
            ?? (batch.sourceOffset, batch.byteCount)
        // The index bounds every stored chunk by its sealed size, which the
        // buffer holds batchwise: this fails only on an internal error, but
        // throws rather than trap the mount.
        guard byteCount <= fetchBuffer.count else {
            throw BundleError.corruptChunk(entry: context.entry.position, chunk: batch.chunks.lowerBound)
        }
        let fetched = UnsafeMutableRawBufferPointer(rebasing: fetchBuffer[0..<byteCount])
        var mayReadAgain = true
        while true {
            let got = try source.read(into: fetched, atOffset: sourceOffset)
            // A short read means the bundle ends early: name the first
            // chunk it cut (the batch's first, for compressed chunks,
            // which bytes do not count).
            guard got == byteCount else {
                throw BundleError.corruptChunk(entry: context.entry.position,
                                               chunk: window == nil ? batch.firstIncompleteChunk(fetched: got) : batch.chunks.lowerBound)
            }
            // The sealed bytes of the chunk being opened: only the copies
            // of those are dropped when it fails.
            var opening = 0..<byteCount
            do {
                for slice in batch {
                    opening = window.map { context.layout.storedSealedRange(of: slice, in: batch, window: $0) } ?? slice.sealedRange
                    try openChunk(slice, of: batch, fetched: fetched, window: window, in: context, openingInto: unit)
                }
                return
            } catch {
                guard case BundleError.corruptChunk = error, mayReadAgain else { throw error }
                guard source.discardCopies(atOffset: sourceOffset + UInt64(opening.lowerBound), count: opening.count) else {
                    throw error
                }
                mayReadAgain = false
            }
        }
    }

    /// Reads a batch of one fragment unit through the cache of units
    /// shared by all threads: a copy when the unit is there (or once
    /// another thread has opened it), else a fetch into the fetch buffer
    /// lent with the claim that opens the unit into the slot claimed for
    /// it. A unit wanted whole goes the same way: no worker's workspace
    /// holds a unit.
    ///
    /// - Throws: what ``readBatch(_:in:fetchingInto:openingInto:)`` throws;
    ///   the slot is then left empty.
    @inline(__always)
    private func readThroughUnitCache(_ batch: ChunkReadPlan.Batch, units: FragmentUnitCache, in context: ReadContext) throws {
        // A fragment's plan has one unit per batch (``readChunks``).
        precondition(batch.chunks.count == 1, "internal error: a batch of several fragment units")
        var slices = batch.makeIterator()
        guard let slice = slices.next() else { return }
        let tag = FragmentUnitCache.Tag(bodyOffset: context.entry.payloadOffset, unit: slice.chunk)
        let destination = UnsafeMutableRawBufferPointer(rebasing: context.buffer[slice.destinationRange])
        guard case .claimed(let slot) = units.lookUp(tag, copying: slice.plaintextRange, into: destination) else { return }
        do {
            try readBatch(batch, in: context, fetchingInto: units.fetchBuffer(slot),
                          openingInto: units.buffer(slot, length: slice.chunkLength))
        } catch {
            units.finish(slot, length: 0, succeeded: false)
            throw error
        }
        units.finish(slot, length: slice.chunkLength, succeeded: true)
    }

    /// Copies the bytes a batch of one partly wanted chunk gives the read
    /// out of the workspace's cache of inflated chunks, when the chunk is
    /// there.
    ///
    /// - Returns: false when the batch has more than one chunk, wants its
    ///   chunk whole, or the chunk is not cached: fetch and open it.
    @inline(__always)
    private func serveFromCache(_ batch: ChunkReadPlan.Batch, cache: InflatedChunkCache, in context: ReadContext) -> Bool {
        guard batch.chunks.count == 1 else { return false }
        var slices = batch.makeIterator()
        guard let slice = slices.next(), !slice.coversWholeChunk,
              let plaintext = cache.cached(context.entry, chunk: slice.chunk) else { return false }
        UnsafeMutableRawBufferPointer(rebasing: context.buffer[slice.destinationRange])
            .copyMemory(from: UnsafeRawBufferPointer(rebasing: plaintext[slice.plaintextRange]))
        return true
    }

    /// Opens one chunk of a fetched batch and puts the bytes its slice
    /// wants into the context's buffer.
    ///
    /// A fragment unit is opened into its slot of the unit cache (`unit`),
    /// wanted whole or not; other whole chunks go straight to the caller;
    /// a partly wanted one is opened aside, since nothing may be released
    /// before the whole chunk authenticated: into the workspace's cache of
    /// inflated chunks for a compressed bundle (the next read inside it
    /// copies from there), else into its plaintext buffer.
    ///
    /// - Throws: `BundleError.corruptChunk` when the chunk does not
    ///   authenticate or does not inflate to its length, `.crypto`.
    @inline(__always)
    private func openChunk(_ slice: ChunkReadPlan.Slice, of batch: ChunkReadPlan.Batch, fetched: UnsafeMutableRawBufferPointer,
                           window: ChunkTableWindow?, in context: ReadContext,
                           openingInto unit: UnsafeMutableRawBufferPointer?) throws {
        let layout = context.layout
        let sealedRange = window.map { layout.storedSealedRange(of: slice, in: batch, window: $0) } ?? slice.sealedRange
        let encoding = window.map { layout.storedEncoding(ofChunk: slice.chunk, in: $0) } ?? .raw
        let sealed = UnsafeMutableRawBufferPointer(rebasing: fetched[sealedRange])
        func decode(into target: UnsafeMutableRawBufferPointer) throws {
            try decodeChunk(slice, sealed: sealed, encoding: encoding, in: context, into: target)
        }
        let destination = UnsafeMutableRawBufferPointer(rebasing: context.buffer[slice.destinationRange])
        if let unit {
            try decode(into: unit)
            destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: unit[slice.plaintextRange]))
        } else if slice.coversWholeChunk {
            try decode(into: destination)
        } else if let cache = context.workspace.inflated, !context.entry.isFragmentBody {
            let plaintext = try cache.fill(context.entry, chunk: slice.chunk, length: slice.chunkLength, open: decode)
            destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: plaintext[slice.plaintextRange]))
        } else {
            // An uncompressed bundle's chunk (a compressed one's reader
            // workspace has no plaintext buffer: its chunks go to the
            // cache above, its fragment units to the unit cache).
            guard slice.chunkLength <= context.workspace.plaintext.count else {
                throw BundleError.corruptChunk(entry: context.entry.position, chunk: slice.chunk)
            }
            let target = UnsafeMutableRawBufferPointer(rebasing: context.workspace.plaintext[0..<slice.chunkLength])
            try decode(into: target)
            destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: target[slice.plaintextRange]))
        }
    }

    /// Authenticates one chunk's sealed bytes and puts its whole plaintext
    /// into `target` (exactly the chunk's plaintext length). A zstd chunk
    /// is opened in place, over its sealed bytes in the fetch buffer
    /// (AES-GCM decrypts in place: no frame-sized buffer per worker),
    /// inflated to exactly its plaintext length, never further, and its
    /// frame wiped.
    ///
    /// - Throws: `BundleError.corruptChunk` (then `target` is wiped),
    ///   `.crypto`.
    @inline(__always)
    private func decodeChunk(_ slice: ChunkReadPlan.Slice, sealed: UnsafeMutableRawBufferPointer, encoding: StoredChunkEncoding,
                             in context: ReadContext, into target: UnsafeMutableRawBufferPointer) throws {
        let workspace = context.workspace
        switch encoding {
        case .raw:
            guard try workspace.codec.open(key: context.key, fileID: context.fileID, chunk: slice.chunk, last: slice.isLastChunk,
                                           sealed: UnsafeRawBufferPointer(sealed), into: target) else {
                throw BundleError.corruptChunk(entry: context.entry.position, chunk: slice.chunk)
            }
        case .zstd:
            // The frame's ciphertext becomes its plaintext, where it lies
            // (a failed open wipes it; the batch is fetched again to retry).
            let frame = UnsafeMutableRawBufferPointer(rebasing: sealed[0..<(sealed.count - AESGCM.tagByteCount)])
            guard try workspace.codec.open(key: context.key, fileID: context.fileID, chunk: slice.chunk, last: slice.isLastChunk,
                                           encoding: .zstd, sealed: UnsafeRawBufferPointer(sealed), into: frame) else {
                throw BundleError.corruptChunk(entry: context.entry.position, chunk: slice.chunk)
            }
            let inflated = workspace.decompressor?.decompress(UnsafeRawBufferPointer(frame), into: target) ?? false
            SecureBytes.wipe(frame)
            guard inflated else {
                SecureBytes.wipe(target)
                throw BundleError.corruptChunk(entry: context.entry.position, chunk: slice.chunk)
            }
        }
    }

    /// One file of this bundle, readable without the bundle's keys (its
    /// own key derived now): what a mount keeps of a file open at lock
    /// under `--protection unless-open`. Nil for a file with a chunk table
    /// (compressed, format 2) or in a fragment: reading it needs the index, which a lock
    /// wipes, so such a file stops reading at lock as under `complete`.
    ///
    /// - Throws: `BundleError.isADirectory` for non-files, `.crypto`.
    package func detachedFile(_ entry: IndexEntry) throws -> DetachedFile? {
        guard !entry.hasChunkTable, !entry.isFragmentSlice else { return nil }
        return DetachedFile(entry: entry, key: try fileKey(for: entry), header: header, source: source, chunksPerBatch: batchChunks)
    }

    /// Copies the payload (chunk data and sealed index) byte for byte to
    /// `output` at `offset`, 1 MiB at a time.
    ///
    /// - Throws: `BundleError.io`, `.lengthMismatch` when the source ends early.
    package func copyPayload(to output: FileDescriptor, at offset: UInt64) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var from = UInt64(header.headerLength)
        var destination = offset
        var remaining = header.payloadLength
        while remaining > 0 {
            let want = Int(min(remaining, UInt64(buffer.count)))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
            let got = try source.read(into: chunk, atOffset: from)
            guard got == want else { throw BundleError.lengthMismatch(expected: header.bundleLength, actual: from + UInt64(got)) }
            try output.writeAll(UnsafeRawBufferPointer(chunk), toAbsoluteOffset: destination)
            from += UInt64(want)
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
