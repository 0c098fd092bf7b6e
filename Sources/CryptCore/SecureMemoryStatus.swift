import Synchronization

/// Remembers whether any secret buffer could not be locked in memory, so a
/// daemon can warn once instead of once per buffer.
package enum SecureMemoryStatus {
    private static let failures = Atomic<Int>(0)

    static func recordLockFailure() {
        failures.add(1, ordering: .relaxed)
    }

    /// How many secret buffers could not be `mlock`ed so far.
    package static var lockFailures: Int { failures.load(ordering: .relaxed) }
}

/// Locking and wiping for buffers that hold plaintext but are owned by the
/// caller (pooled chunk and reply buffers), with the same best-effort rules
/// as ``SecureBytes``.
///
/// Any buffer may be locked, page-aligned or not: pages that a buffer shares
/// with another locked buffer (its first and last, when it does not start or
/// end on a page boundary) stay locked until the last of them is released.
/// Each successful ``lock(_:)`` must be paired with one
/// ``release(_:locked:)`` of the same buffer before the buffer is freed.
/// Page-aligned buffers of whole pages are still the better choice: their
/// locked pages hold nothing but their own bytes.
package enum SecureMemory {
    /// `mlock`s `buffer`; returns false (and counts a failure for
    /// ``SecureMemoryStatus/lockFailures``) when `RLIMIT_MEMLOCK` forbids it.
    @discardableResult
    package static func lock(_ buffer: UnsafeMutableRawBufferPointer) -> Bool { MemoryLock.lock(buffer) }

    /// Wipes `buffer` and, when `locked`, unlocks the pages no other locked
    /// buffer still covers; call it before the caller frees `buffer`.
    package static func release(_ buffer: UnsafeMutableRawBufferPointer, locked: Bool) {
        SecureBytes.wipe(buffer)
        if locked { MemoryLock.unlock(buffer) }
    }
}

