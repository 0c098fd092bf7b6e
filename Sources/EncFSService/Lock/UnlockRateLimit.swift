/// At most ``allowedFailures`` secrets tried without success per
/// ``window`` seconds: every secret of a failed unlock counts, so a peer
/// cannot guess passphrases through the daemon at scrypt speed by putting
/// many into one request. A request that would go over is refused before
/// any of its secrets is tried.
package struct UnlockRateLimit: Sendable {
    package static let allowedFailures = 5
    package static let window = 60
    /// Monotonic seconds of the recent failed secrets, oldest first.
    private var failures: [Int] = []

    /// Seconds until `secrets` more may be tried at `now`; 0 when they
    /// may now.
    ///
    /// - Precondition: `secrets` is at most ``allowedFailures`` (a larger
    ///   request is refused before it gets here).
    package mutating func waitBeforeAttempt(secrets: Int, now: Int) -> Int {
        failures.removeAll { now - $0 >= Self.window }
        let over = failures.count + secrets - Self.allowedFailures
        guard over > 0 else { return 0 }
        // The failure whose expiry makes room for the last of them.
        let expiring = failures[min(over, failures.count) - 1]
        return max(1, Self.window - (now - expiring))
    }

    /// Records `secrets` failed secrets at `now`.
    package mutating func recordFailure(secrets: Int = 1, now: Int) {
        failures.append(contentsOf: repeatElement(now, count: secrets))
        if failures.count > Self.allowedFailures { failures.removeFirst(failures.count - Self.allowedFailures) }
    }
}
