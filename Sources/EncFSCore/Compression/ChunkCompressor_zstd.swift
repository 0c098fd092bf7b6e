internal import CZstd
#if canImport(Glibc)
import Glibc
#endif

/// Compresses single chunks with zstd for the packer: one context, reused
/// for every chunk (a context per chunk would allocate its tables each
/// time). Not thread-safe: one per packing thread.
package final class ChunkCompressor {
    private let context: OpaquePointer
    /// The zstd level, 1 … 19.
    let level: Int

    /// - Throws: `BundleError.invalidCompressionLevel` outside 1 … 19,
    ///   `.io` when libzstd cannot make or set up a context.
    package init(level: Int) throws {
        guard CompressionMethod.zstdLevels.contains(level) else {
            throw BundleError.invalidCompressionLevel(level)
        }
        guard let context = ZSTD_createCCtx() else { throw BundleError.io(errno: ENOMEM, operation: "create zstd context", path: []) }
        self.context = context
        self.level = level
        // No frame checksum: the chunk's GCM tag already authenticates it.
        guard ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, Int32(level))) == 0,
              ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 0)) == 0,
              ZSTD_isError(ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1)) == 0 else {
            ZSTD_freeCCtx(context)
            throw BundleError.io(errno: EINVAL, operation: "set zstd parameters", path: [])
        }
    }

    deinit { ZSTD_freeCCtx(context) }

    /// Compresses `source` into `destination` when that makes it smaller.
    ///
    /// The caller passes a destination shorter than the source (the chunk
    /// is worth compressing only if it shrinks); zstd gives up when its
    /// output would not fit. The corresponding C function is `ZSTD_compress2`.
    ///
    /// - Returns: the compressed length, or nil when the chunk does not fit
    ///   in `destination` (store it raw).
    package func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard let to = destination.baseAddress, let from = source.baseAddress, destination.count > 0 else { return nil }
        let result = ZSTD_compress2(context, to, destination.count, from, source.count)
        guard ZSTD_isError(result) == 0 else { return nil }
        return Int(result)
    }
}
