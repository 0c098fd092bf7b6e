import CryptCore
import Synchronization

/// The zstd compressors of a ``ChunkPipeline``, each with the buffer it
/// writes a chunk's frame into, lent to one worker job at a time.
///
/// Per job, not per slot: a zstd context's match tables are most of the
/// memory compressing touches, and with one context per slot the two
/// workers cycled through sixteen of them, more than a core's L2 cache
/// holds (cachegrind with a 4 MiB cache: four times the cache misses of two
/// contexts; docs/PERFORMANCE.md). The pool lends the context given back
/// last, so a worker going on to its next job keeps the context its cache
/// already holds.
final class ChunkCompressionPool: Sendable {
    /// A compressor and its frame buffer. The buffer holds compressed
    /// plaintext: the job wipes what it wrote after each chunk, and it is
    /// wiped again when freed. `@unchecked Sendable`: the pool lends it to
    /// one job at a time.
    final class Lease: @unchecked Sendable {
        let compressor: ChunkCompressor
        let frame: UnsafeMutableRawBufferPointer

        init(chunkSize: Int, level: Int) throws {
            compressor = try ChunkCompressor(level: level)
            frame = .allocate(byteCount: chunkSize, alignment: 4096)
            frame.initializeMemory(as: UInt8.self, repeating: 0)
        }

        deinit {
            SecureBytes.wipe(frame)
            frame.deallocate()
        }
    }

    private let idle: Mutex<[Lease]>

    /// - Parameter count: at least the number of jobs that can be in
    ///   flight at once, so that ``take()`` always finds one.
    /// - Throws: `BundleError.io` when libzstd cannot make a context.
    init(count: Int, chunkSize: Int, level: Int) throws {
        idle = Mutex(try (0..<count).map { _ in try Lease(chunkSize: chunkSize, level: level) })
    }

    /// The lease given back last.
    func take() -> Lease {
        guard let lease = idle.withLock({ $0.popLast() }) else {
            preconditionFailure("internal error: more compression jobs than compressors")
        }
        return lease
    }

    func giveBack(_ lease: Lease) {
        idle.withLock { $0.append(lease) }
    }
}
