internal import CZstd
#if canImport(Glibc)
import Glibc
#endif

/// Inflates single zstd chunks into a buffer of exactly the chunk's
/// plaintext length: a frame that would grow past it (a decompression bomb,
/// or a chunk lying about its size) fails, it never writes further.
///
/// One per workspace (per reading thread); not thread-safe.
package final class ChunkDecompressor {
    private let context: OpaquePointer

    /// Largest window a chunk's frame may ask for: the largest chunk size
    /// (a chunk is one frame of at most 1 MiB), so a hostile frame cannot
    /// make the decoder reserve more.
    static let windowLogMax: Int32 = Int32(BundleFormat.chunkSizeLog2Range.upperBound)

    /// - Throws: `BundleError.io` when libzstd cannot make or set up a context.
    package init() throws {
        guard let context = ZSTD_createDCtx() else { throw BundleError.io(errno: ENOMEM, operation: "create zstd context", path: []) }
        self.context = context
        guard ZSTD_isError(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, Self.windowLogMax)) == 0 else {
            ZSTD_freeDCtx(context)
            throw BundleError.io(errno: EINVAL, operation: "set zstd parameters", path: [])
        }
    }

    deinit { ZSTD_freeDCtx(context) }

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
