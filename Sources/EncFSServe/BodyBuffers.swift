import CryptCore
import EncFSCore
import Synchronization

/// Buffers for whole small bodies, reused from one response to the next.
///
/// A body of at most ``bodyBytes`` is decrypted whole before the headers
/// go out, into one of these, and handed to libmicrohttpd as the
/// response's data: it then sends headers and body with one system call
/// (one TCP segment on loopback) instead of two, allocates no send block
/// for the response, and a damaged chunk is answered 500 instead of a
/// truncated 200.
///
/// Each buffer starts with a small header holding its pool, so the one
/// pointer libmicrohttpd hands back when the response is freed finds its
/// way home without anything allocated per response. A buffer is wiped
/// (the bytes used) when it comes back; at most ``keptBuffers`` are kept,
/// more are freed.
final class BodyBuffers: @unchecked Sendable {
    /// The largest body served this way.
    static let bodyBytes = 64 * 1024
    /// Bytes before the body: the pool's address and the bytes used.
    static let headerBytes = 64
    /// Buffers kept for reuse; beyond that, buffers are freed on return.
    let keptBuffers: Int
    /// Kept buffers' addresses (as integers: pointers are not `Sendable`).
    private let free = Mutex<[UInt]>([])

    init(keptBuffers: Int) {
        self.keptBuffers = keptBuffers
        free.withLock { $0.reserveCapacity(keptBuffers) }
    }

    /// A buffer: its address (for ``giveBack(_:)``) and its body bytes.
    func take() -> (base: UnsafeMutableRawPointer, body: UnsafeMutableRawBufferPointer) {
        let base = free.withLock { $0.popLast() }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
            ?? UnsafeMutableRawPointer.allocate(byteCount: Self.headerBytes + Self.bodyBytes, alignment: 64)
        base.storeBytes(of: Unmanaged.passUnretained(self).toOpaque(), as: UnsafeMutableRawPointer.self)
        base.storeBytes(of: 0, toByteOffset: MemoryLayout<UnsafeMutableRawPointer>.size, as: Int.self)
        return (base, UnsafeMutableRawBufferPointer(start: base + Self.headerBytes, count: Self.bodyBytes))
    }

    /// Records how many body bytes `base` holds (what a return wipes).
    static func setUsed(_ count: Int, in base: UnsafeMutableRawPointer) {
        base.storeBytes(of: count, toByteOffset: MemoryLayout<UnsafeMutableRawPointer>.size, as: Int.self)
    }

    /// Wipes the bytes used and returns the buffer to its pool (named in
    /// its header; the pool outlives every response, as the server does).
    static func giveBack(_ base: UnsafeMutableRawPointer) {
        let pool = Unmanaged<BodyBuffers>.fromOpaque(base.load(as: UnsafeMutableRawPointer.self)).takeUnretainedValue()
        let used = base.load(fromByteOffset: MemoryLayout<UnsafeMutableRawPointer>.size, as: Int.self)
        SecureBytes.wipe(UnsafeMutableRawBufferPointer(start: base + headerBytes, count: min(max(used, 0), bodyBytes)))
        let address = UInt(bitPattern: base)
        let kept = pool.free.withLock { buffers in
            guard buffers.count < pool.keptBuffers else { return false }
            buffers.append(address)
            return true
        }
        if !kept { base.deallocate() }
    }

    /// Decrypts `length` bytes of `entry` from `start` into `body`.
    ///
    /// - Returns: false (logged with inode and chunk) when they cannot be
    ///   read: answer 500.
    static func fill(_ body: UnsafeMutableRawBufferPointer, base: UnsafeMutableRawPointer, reader: BundleReader,
                     entry: IndexEntry, start: UInt64, length: Int, log: ServeLog) -> Bool {
        setUsed(length, in: base)
        do {
            // The pooled workspace keeps the file's key: a file asked for
            // again is not derived again.
            let n = try reader.read(entry, fromOffset: start, into: UnsafeMutableRawBufferPointer(rebasing: body[0..<length]))
            guard n == length else {
                log.log("error", "inode \(entry.position + 1) ended early, answered 500")
                return false
            }
            return true
        } catch {
            BodyStream.logFailure(error, entry: entry, log: log, outcome: "answered 500")
            return false
        }
    }
}
