import EncFS
import Synchronization

/// A `ByteSource` of the test's own, as an application would write one
/// (for a remote object, say): bytes in memory, reads counted, and a switch
/// that makes every later read fail with a chosen error.
final class CountingSource: ByteSource {
    private let bytes: [UInt8]
    private let state = Mutex<(reads: Int, failure: (any Error)?)>((0, nil))

    var size: UInt64 { UInt64(bytes.count) }
    var displayName: [UInt8] { Array("counting source".utf8) }
    var identity: ByteSourceIdentity { ByteSourceIdentity(bytes: [1]) }

    /// Reads served so far.
    var reads: Int { state.withLock { $0.reads } }

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Makes every later read throw `error`.
    func failReads(with error: any Error) { state.withLock { $0.failure = error } }

    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        let failure = state.withLock { state -> (any Error)? in
            state.reads += 1
            return state.failure
        }
        if let failure { throw failure }
        guard offset < UInt64(bytes.count), buffer.count > 0 else { return 0 }
        let start = Int(offset)
        let count = min(buffer.count, bytes.count - start)
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<(start + count)])) }
        return count
    }
}
