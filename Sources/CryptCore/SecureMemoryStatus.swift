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
