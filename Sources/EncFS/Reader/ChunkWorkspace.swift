import CryptCore

/// Scratch space for reading one chunk: a cipher context and two buffers.
///
/// Workspaces are pooled by `BundleReader` so the read path allocates
/// nothing once the pool has warmed up; the plaintext buffer is wiped when a
/// workspace is freed. `@unchecked Sendable`: a workspace is used by one
/// thread at a time; ownership moves only through the reader's locked pool.
final class ChunkWorkspace: @unchecked Sendable {
    let codec: ChunkCodec
    /// Holds one sealed chunk (chunk size + 16).
    let sealed: UnsafeMutableRawBufferPointer
    /// Holds one decrypted chunk when a read covers only part of it.
    let plaintext: UnsafeMutableRawBufferPointer
    private let plaintextLocked: Bool

    init(layout: ChunkLayout, bundleID: [UInt8]) throws {
        codec = try ChunkCodec(bundleID: bundleID)
        sealed = .allocate(byteCount: Int(layout.sealedChunkSize), alignment: 4096)
        sealed.initializeMemory(as: UInt8.self, repeating: 0)
        plaintext = .allocate(byteCount: Int(layout.chunkSize), alignment: 4096)
        plaintext.initializeMemory(as: UInt8.self, repeating: 0)
        plaintextLocked = SecureMemory.lock(plaintext)
    }

    deinit {
        SecureMemory.release(plaintext, locked: plaintextLocked)
        sealed.deallocate()
        plaintext.deallocate()
    }
}
