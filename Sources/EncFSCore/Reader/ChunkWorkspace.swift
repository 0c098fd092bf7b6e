import CryptCore

/// Scratch space for reading one chunk: a cipher context, a fetch buffer,
/// a plaintext buffer and the keys of the files it read last; for a
/// compressed bundle also a zstd context, one buffer for chunk table
/// entries and, for a reader, the chunks its partial reads inflated last.
///
/// Workspaces are pooled by `BundleReader` so the read path allocates
/// nothing once the pool has warmed up; the plaintext buffers are wiped
/// when a workspace is freed, cached keys when they are replaced or freed.
/// `@unchecked Sendable`: a workspace is used by one thread at a time;
/// ownership moves only through the reader's locked pool.
///
/// A mount keeps one per worker thread, so every buffer here counts once
/// per worker in the daemon's memory: a reader's workspace holds no
/// fragment unit (the reader's ``FragmentUnitCache`` fetches and opens
/// units in its own buffers) and, for a compressed bundle, no chunk of
/// plaintext outside its ``InflatedChunkCache``.
package final class ChunkWorkspace: @unchecked Sendable {
    let codec: ChunkCodec
    /// Holds one batch of consecutive sealed chunks, read with one `pread`
    /// (see ``ChunkLayout/chunksPerBatch(batchBytes:)``). A zstd chunk is
    /// opened in place here before it is inflated, so in a compressed
    /// bundle this holds plaintext frames for a moment: locked, and wiped
    /// when freed (each frame is wiped once inflated).
    let sealed: UnsafeMutableRawBufferPointer
    private let sealedLocked: Bool
    private let sealedHoldsPlaintext: Bool
    /// Byte budget of one batch: small enough to stay in the core's cache
    /// until it is decrypted.
    static let batchBytes = 64 << 10
    /// Holds one decrypted chunk when a read covers only part of it; in a
    /// pass's workspace also a fragment unit. Empty in a reader's
    /// workspace of a compressed bundle: there a partly read chunk is
    /// opened into the ``InflatedChunkCache``, a partly read unit into the
    /// reader's ``FragmentUnitCache``.
    let plaintext: UnsafeMutableRawBufferPointer
    private let plaintextLocked: Bool
    /// Inflates zstd chunks (compressed bundles only).
    let decompressor: ChunkDecompressor?
    /// Holds the chunk table entries of one batch (``ChunkTableWindow``).
    let tableEntries: UnsafeMutableRawBufferPointer
    /// The file chunks a reader's partial reads inflated last (a reader's
    /// workspace of a compressed bundle only; nil for passes that read
    /// every chunk once). Fragment units are cached by the reader.
    let inflated: InflatedChunkCache?
    /// The files whose entries and keys are cached, by slot: index
    /// position, −1 while a slot is empty. A workspace belongs to one reader
    /// (one bundle), so a position names one file.
    private var cachedPositions: [Int]
    private var cachedEntries: [IndexEntry?]
    /// The cached file keys, by slot.
    private var cachedKeys: [SymmetricKey?]
    /// The slot the next miss replaces (round robin).
    private var nextSlot = 0
    /// Files cached per workspace. The mount's reads carry no per-open
    /// state (the kernel usually skips open and release), so a read finds its file's entry and
    /// key here, without touching the index; a few slots cover a thread
    /// alternating between files.
    static let cachedKeyCount = 4

    /// - Parameter batchBytes: the sealed bytes one fetch may bring; whole
    ///   passes over a bundle (verify, re-encryption) take larger batches
    ///   than the mount's reads.
    /// - Parameter compressed: the bundle's chunks are compressed
    ///   (``BundleFeatures/isCompressed``).
    /// - Parameter forReader: a ``BundleReader``'s workspace: it keeps the
    ///   chunks partial reads inflate (``InflatedChunkCache``; with
    ///   `compressed` only) and reads fragment units through the reader's
    ///   cache, never into its own buffers.
    /// - Parameter fragmentLayout: the bundle's fragment units, when they
    ///   are larger than its chunks: a pass's workspace fetches, opens and
    ///   inflates a unit whole like a chunk, so its buffers hold the larger
    ///   of the two (ignored with `forReader`).
    init(layout: ChunkLayout, fragmentLayout: ChunkLayout? = nil, bundleID: [UInt8], batchBytes: Int = ChunkWorkspace.batchBytes,
         compressed: Bool = false, forReader: Bool = false) throws {
        let units = forReader ? layout : fragmentLayout ?? layout
        codec = try ChunkCodec(bundleID: bundleID, compressed: compressed)
        // Fragment units are cached by the reader, for all workers
        // (``FragmentUnitCache``): this cache holds file chunks only.
        inflated = compressed && forReader ? InflatedChunkCache(chunkSize: Int(layout.chunkSize)) : nil
        decompressor = compressed ? try ChunkDecompressor() : nil
        let tableSlots = max(layout.chunksPerBatch(batchBytes: batchBytes), units.chunksPerBatch(batchBytes: batchBytes)) + 1
        tableEntries = .allocate(byteCount: compressed ? tableSlots * ChunkTableWindow.entrySize : 0, alignment: 8)
        tableEntries.initializeMemory(as: UInt8.self, repeating: 0)
        sealed = .allocate(byteCount: max(layout.batchCapacity(batchBytes: batchBytes), units.batchCapacity(batchBytes: batchBytes)),
                           alignment: 4096)
        sealed.initializeMemory(as: UInt8.self, repeating: 0)
        sealedHoldsPlaintext = compressed
        sealedLocked = compressed && SecureMemory.lock(sealed)
        let plaintextBytes = forReader ? (compressed ? 0 : Int(layout.chunkSize)) : Int(max(layout.chunkSize, units.chunkSize))
        plaintext = .allocate(byteCount: plaintextBytes, alignment: 4096)
        plaintext.initializeMemory(as: UInt8.self, repeating: 0)
        plaintextLocked = SecureMemory.lock(plaintext)
        cachedPositions = Array(repeating: -1, count: Self.cachedKeyCount)
        cachedEntries = Array(repeating: nil, count: Self.cachedKeyCount)
        cachedKeys = Array(repeating: nil, count: Self.cachedKeyCount)
    }

    /// The cached entry at index `position`, if this workspace read that
    /// file recently.
    package func cachedEntry(at position: Int) -> IndexEntry? {
        for slot in 0..<Self.cachedKeyCount where cachedPositions[slot] == position {
            return cachedEntries[slot]
        }
        return nil
    }

    /// The key of file `entry`, derived on a miss (and then cached with the
    /// entry).
    ///
    /// - Parameters:
    ///   - entry: a file entry of this workspace's bundle.
    ///   - keys: derive the key from these on a miss.
    /// - Throws: `BundleError.crypto` when the derivation fails.
    func fileKey(for entry: IndexEntry, keys: BundleKeys) throws -> SymmetricKey {
        for slot in 0..<Self.cachedKeyCount where cachedPositions[slot] == entry.position {
            if let key = cachedKeys[slot] { return key }
        }
        // The one-shot HMAC, not a kept ``HMACSHA256Context``: with a context
        // kept here, LockMemoryTests found the content key (HKDF's input)
        // still in the daemon's memory after a lock that freed the
        // workspace and its context (docs/PERFORMANCE.md).
        let key = try entry.withFileID { try keys.fileKey(fileID: $0) }
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.cachedKeyCount
        cachedPositions[slot] = entry.position
        cachedEntries[slot] = entry
        cachedKeys[slot] = key
        return key
    }

    deinit {
        SecureMemory.release(plaintext, locked: plaintextLocked)
        if sealedHoldsPlaintext { SecureMemory.release(sealed, locked: sealedLocked) }
        sealed.deallocate()
        plaintext.deallocate()
        tableEntries.deallocate()
    }
}
