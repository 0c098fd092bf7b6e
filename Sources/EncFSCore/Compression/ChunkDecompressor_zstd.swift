internal import CZstd
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Inflates single zstd chunks into a buffer of exactly the chunk's
/// plaintext length: a frame that would grow past it (a decompression bomb,
/// or a chunk lying about its size) fails, it never writes further.
///
/// The zstd context lives in memory this object owns, locked and wiped when
/// it is freed (`ZSTD_initStaticDCtx`): while inflating, zstd decodes a
/// block's literals into the context's own buffer, so the context holds
/// plaintext, and a context from `ZSTD_createDCtx` would be freed unwiped
/// (a mount frees its workers' workspaces, and so this, at lock). One-shot
/// decompression needs nothing beyond ``ZSTD_estimateDCtxSize``.
///
/// One per workspace (per reading thread); not thread-safe.
package final class ChunkDecompressor {
    private let context: OpaquePointer
    /// The context's memory.
    private let memory: UnsafeMutableRawBufferPointer
    private let memoryLocked: Bool

    /// Largest window a chunk's frame may ask for: the largest chunk size
    /// (a chunk is one frame of at most 1 MiB), so a hostile frame cannot
    /// make the decoder reserve more.
    static let windowLogMax: Int32 = Int32(BundleFormat.chunkSizeLog2Range.upperBound)

    /// - Throws: `BundleError.io` when libzstd cannot set up a context.
    package init() throws {
        let size = ZSTD_estimateDCtxSize()
        // libzstd needs 8-byte alignment; a page keeps the locked pages its own.
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
        memory.initializeMemory(as: UInt8.self, repeating: 0)
        let locked = SecureMemory.lock(memory)
        guard let context = ZSTD_initStaticDCtx(memory.baseAddress, size),
              ZSTD_isError(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, Self.windowLogMax)) == 0 else {
            SecureMemory.release(memory, locked: locked)
            memory.deallocate()
            throw BundleError.io(errno: EINVAL, operation: "set up zstd context", path: [])
        }
        self.context = context
        self.memory = memory
        memoryLocked = locked
    }

    // A static context is not freed through libzstd: its memory is ours.
    deinit {
        SecureMemory.release(memory, locked: memoryLocked)
        memory.deallocate()
    }

    /// Inflates `source` into all of `destination`. The corresponding C
    /// function is `ZSTD_decompressDCtx`.
    ///
    /// - Returns: true when `source` is one frame that inflates to exactly
    ///   `destination.count` bytes; false for anything else (bad data, more
    ///   or fewer bytes, trailing bytes). On false, `destination` may hold
    ///   partial output: the caller wipes it.
    package func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard let from = source.baseAddress, let to = destination.baseAddress, source.count > 0 else { return false }
        // The frame must be exactly the source: nothing after it.
        let frame = ZSTD_findFrameCompressedSize(from, source.count)
        guard ZSTD_isError(frame) == 0, frame == source.count else { return false }
        let result = ZSTD_decompressDCtx(context, to, destination.count, from, source.count)
        return ZSTD_isError(result) == 0 && result == destination.count
    }
}
