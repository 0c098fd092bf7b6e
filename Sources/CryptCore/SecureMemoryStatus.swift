import Synchronization

/// Remembers whether any secret buffer could not be locked in memory, so a
/// daemon can warn once instead of once per buffer.
public enum SecureMemoryStatus {
    private static let failures = Atomic<Int>(0)

    static func recordLockFailure() {
        failures.add(1, ordering: .relaxed)
    }

    /// How many secret buffers could not be `mlock`ed so far.
    public static var lockFailures: Int { failures.load(ordering: .relaxed) }
}

/// Locking and wiping for buffers that hold plaintext but are owned by the
/// caller (pooled chunk and reply buffers), with the same best-effort rules
/// as ``SecureBytes``.
public enum SecureMemory {
    /// `mlock`s `buffer`; returns false (and counts a failure for
    /// ``SecureMemoryStatus/lockFailures``) when `RLIMIT_MEMLOCK` forbids it.
    @discardableResult
    public static func lock(_ buffer: UnsafeMutableRawBufferPointer) -> Bool { MemoryLock.lock(buffer) }

    /// Wipes and unlocks `buffer` before the caller frees it.
    public static func release(_ buffer: UnsafeMutableRawBufferPointer, locked: Bool) {
        SecureBytes.wipe(buffer)
        if locked { MemoryLock.unlock(buffer) }
    }
}

