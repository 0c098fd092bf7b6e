@testable import EncFSCore
import Synchronization

/// A bundle held in memory whose reads are counted: how the reader's
/// caches are seen to spare a fetch.
final class CountingMemorySource: ByteSource {
    private let memory: MemoryByteSource
    private let count = Mutex(0)

    init(_ bytes: [UInt8]) { memory = MemoryByteSource(bytes: bytes) }

    var size: UInt64 { memory.size }
    var displayName: [UInt8] { memory.displayName }
    var identity: ByteSourceIdentity { memory.identity }
    /// Reads served so far.
    var reads: Int { count.withLock { $0 } }

    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        count.withLock { $0 += 1 }
        return try memory.read(into: buffer, atOffset: offset)
    }
}
