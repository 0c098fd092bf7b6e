import CryptCore

/// Scratch space for reading one chunk: a cipher context, two buffers and
/// the keys of the files it read last.
///
/// Workspaces are pooled by `BundleReader` so the read path allocates
/// nothing once the pool has warmed up; the plaintext buffer is wiped when a
/// workspace is freed, cached keys when they are replaced or freed. `@unchecked Sendable`: a workspace is used by one
/// thread at a time; ownership moves only through the reader's locked pool.
final class ChunkWorkspace: @unchecked Sendable {
    let codec: ChunkCodec
    /// Holds ``batchChunks`` consecutive sealed chunks (chunk size + 16
    /// each), read with one `pread`.
    let sealed: UnsafeMutableRawBufferPointer
    /// Sealed chunks fetched per `pread`: as many as fit in ``batchBytes``,
    /// at least one. Fewer system calls for small chunks, and the batch
    /// stays in the core's cache until it is decrypted.
    let batchChunks: Int
    static let batchBytes = 64 << 10
    /// Holds one decrypted chunk when a read covers only part of it.
    let plaintext: UnsafeMutableRawBufferPointer
    private let plaintextLocked: Bool
    /// The ids of the files whose keys are cached, 16 bytes per slot.
    private let cachedFileIDs: UnsafeMutableRawBufferPointer
    /// The cached file keys, by slot; nil while a slot is empty.
    private var cachedKeys: [SymmetricKey?]
    /// The slot the next miss replaces (round robin).
    private var nextSlot = 0
    /// Keys cached per workspace. The mount has no per-open state (the
    /// kernel skips open and release), so a read finds its file's key here;
    /// a few slots cover a thread alternating between files.
    static let cachedKeyCount = 4

    init(layout: ChunkLayout, bundleID: [UInt8]) throws {
        codec = try ChunkCodec(bundleID: bundleID)
        batchChunks = max(1, Self.batchBytes / Int(layout.sealedChunkSize))
        sealed = .allocate(byteCount: batchChunks * Int(layout.sealedChunkSize), alignment: 4096)
        sealed.initializeMemory(as: UInt8.self, repeating: 0)
        plaintext = .allocate(byteCount: Int(layout.chunkSize), alignment: 4096)
        plaintext.initializeMemory(as: UInt8.self, repeating: 0)
        plaintextLocked = SecureMemory.lock(plaintext)
        cachedFileIDs = .allocate(byteCount: Self.cachedKeyCount * BundleFormat.idSize, alignment: 8)
        cachedFileIDs.initializeMemory(as: UInt8.self, repeating: 0)
        cachedKeys = Array(repeating: nil, count: Self.cachedKeyCount)
    }

    /// The key of the file with id `fileID`, derived on a miss.
    ///
    /// - Parameters:
    ///   - fileID: the file's 16-byte id.
    ///   - keys: derive the key from these on a miss.
    /// - Throws: `BundleError.crypto` when the derivation fails.
    func fileKey(fileID: UnsafeRawBufferPointer, keys: BundleKeys) throws -> SymmetricKey {
        let size = BundleFormat.idSize
        for slot in 0..<Self.cachedKeyCount {
            if let key = cachedKeys[slot],
               UnsafeRawBufferPointer(rebasing: cachedFileIDs[(slot * size)..<((slot + 1) * size)]).elementsEqual(fileID) {
                return key
            }
        }
        let key = try keys.fileKey(fileID: fileID)
        let slot = nextSlot
        nextSlot = (nextSlot + 1) % Self.cachedKeyCount
        UnsafeMutableRawBufferPointer(rebasing: cachedFileIDs[(slot * size)..<((slot + 1) * size)]).copyMemory(from: fileID)
        cachedKeys[slot] = key
        return key
    }

    deinit {
        SecureMemory.release(plaintext, locked: plaintextLocked)
        sealed.deallocate()
        plaintext.deallocate()
        cachedFileIDs.deallocate()
    }
}
