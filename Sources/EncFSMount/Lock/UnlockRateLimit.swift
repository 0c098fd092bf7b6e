/// At most ``allowedFailures`` failed unlocks per ``window`` seconds: a
/// sixth attempt within a minute of five failures is refused before any
/// key is tried, so a peer cannot guess passphrases through the daemon at
/// scrypt speed.
struct UnlockRateLimit: Sendable {
    static let allowedFailures = 5
    static let window = 60
    /// Monotonic seconds of the recent failures.
    private var failures: [Int] = []

    /// Seconds until another attempt is allowed at `now`; 0 when it is.
    mutating func waitBeforeAttempt(now: Int) -> Int {
        failures.removeAll { now - $0 >= Self.window }
        guard failures.count >= Self.allowedFailures, let oldest = failures.first else { return 0 }
        return max(1, Self.window - (now - oldest))
    }

    /// Records a failed attempt at `now`.
    mutating func recordFailure(now: Int) {
        failures.append(now)
        if failures.count > Self.allowedFailures { failures.removeFirst(failures.count - Self.allowedFailures) }
    }
}
