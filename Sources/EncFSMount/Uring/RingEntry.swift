import CryptCore
import CUring
#if canImport(Glibc)
import Glibc
#endif

/// One registered slot of a FUSE ring: the header buffer and the payload
/// buffer the kernel writes a request into and reads our reply from.
///
/// The payload is mapped lazily (only pages a request or reply touched
/// become resident); its first ``MountContext/maximumRead`` bytes, where
/// read replies are decrypted, are locked like the classic reply buffer,
/// each page as it is first touched.
/// Used by its ring thread only.
final class RingEntry: @unchecked Sendable {
    /// The position in its queue's entries: the SQE's user data.
    let index: Int
    let headers: UnsafeMutablePointer<curing_req_header>
    let payload: UnsafeMutableRawBufferPointer
    /// The two buffers as the kernel's REGISTER reads them.
    let vectors: UnsafeMutablePointer<iovec>
    /// The part of the payload read replies use, locked when allowed.
    private let replyPart: UnsafeMutableRawBufferPointer
    private let locked: Bool
    /// Set by the reply hook once libfuse answered the request in this entry.
    var replied = false

    /// - Parameters:
    ///   - index: the entry's number in its queue.
    ///   - payloadBytes: at least the kernel's largest request or reply.
    /// - Returns: nil when the payload cannot be mapped.
    init?(index: Int, payloadBytes: Int) {
        guard let mapped = mmap(nil, payloadBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              mapped != MAP_FAILED else { return nil }
        self.index = index
        payload = UnsafeMutableRawBufferPointer(start: mapped, count: payloadBytes)
        headers = .allocate(capacity: 1)
        headers.initialize(to: curing_req_header())
        vectors = .allocate(capacity: 2)
        vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(headers), iov_len: MemoryLayout<curing_req_header>.size)
        vectors[1] = iovec(iov_base: mapped, iov_len: payloadBytes)
        replyPart = UnsafeMutableRawBufferPointer(rebasing: payload[0..<min(payloadBytes, MountContext.maximumRead)])
        // Locked page by page as replies first touch them: locking (and so
        // faulting in) every entry's whole reply part at INIT delayed the
        // first answer of every mount. The part is whole pages of its own
        // mapping, so no other buffer shares them. Where that is refused,
        // the ordinary lock tries (and records a failure for the warning).
        locked = curing_mlock_on_fault(mapped, replyPart.count) == 0 || SecureMemory.lock(replyPart)
    }

    /// Whether the request in the entry reads at least `bytes` (a
    /// read-ahead request, worth another thread's wake-up; a 4 KiB read
    /// is served faster where it arrived).
    func isRead(ofAtLeast bytes: Int) -> Bool {
        let raw = UnsafeRawPointer(headers)
        // fuse_in_header: opcode at 4; fuse_read_in (op_in): size at 16.
        let opIn = MemoryLayout.offset(of: \curing_req_header.op_in) ?? 128
        return raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == FUSE_READ.rawValue
            && Int(raw.loadUnaligned(fromByteOffset: opIn + 16, as: UInt32.self)) >= bytes
    }

    /// Wipes the reply part of the payload from `start` on (what a read
    /// reply left; a request the kernel just put there ends before `start`).
    func wipeReplyPart(from start: Int) {
        guard start < replyPart.count else { return }
        SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: replyPart[max(0, start)...]))
    }

    deinit {
        // Wiped first: the payload held plaintext replies.
        SecureMemory.release(replyPart, locked: locked)
        munmap(payload.baseAddress, payload.count)
        headers.deallocate()
        vectors.deallocate()
    }
}
