import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Retries transient network failures with exponential backoff and full
/// jitter until a deadline or a retry budget runs out.
///
/// Full jitter (a delay drawn uniformly from 0 to the exponential bound)
/// keeps many readers that failed together from retrying together. A
/// `Retry-After` from the server replaces the drawn delay. Each attempt
/// gets the time left until the deadline as its own timeout, so a stalled
/// transfer never outlives the read that waits for it.
struct RemoteRetryPolicy: Sendable {
    /// What one attempt says.
    enum Outcome<Value> {
        case done(Value)
        /// Try again (after `after` seconds when the server said so).
        case retry(String, after: Int?)
    }

    /// Seconds one read may take; 0: no limit.
    let timeoutSeconds: Int
    /// Attempts after the first.
    let retries: Int
    /// First backoff bound and its ceiling, in milliseconds.
    static let initialBackoff = 100
    static let maximumBackoff = 5_000

    /// The deadline of a read starting now (`.distantFuture` without one).
    func deadline() -> DispatchTime {
        timeoutSeconds == 0 ? .distantFuture : .now() + .seconds(timeoutSeconds)
    }

    /// Runs `attempt` until it is done, it throws, or time or retries run
    /// out. `attempt` gets the milliseconds left (0: no limit).
    ///
    /// - Throws: what `attempt` throws, or `RemoteError.gaveUp` with the
    ///   last transient failure.
    func run<Value>(until deadline: DispatchTime? = nil,
                    _ attempt: (Int) throws(RemoteError) -> Outcome<Value>) throws(RemoteError) -> Value {
        let deadline = deadline ?? self.deadline()
        var tries = 0
        while true {
            let left = millisecondsLeft(until: deadline)
            guard left != nil else { throw .gaveUp(last: "deadline reached") }
            switch try attempt(left ?? 0) {
            case .done(let value):
                return value
            case .retry(let why, let after):
                tries += 1
                guard tries <= retries else { throw .gaveUp(last: why) }
                let bound = min(Self.maximumBackoff, Self.initialBackoff << min(tries - 1, 16))
                let delay = after.map { min($0, 3600) * 1000 } ?? Int.random(in: 0...bound)
                if let left = millisecondsLeft(until: deadline), left != 0, delay >= left { throw .gaveUp(last: why) }
                usleep(UInt32(min(delay, 3_600_000)) * 1000)
            }
        }
    }

    /// Milliseconds until `deadline`: 0 for no deadline, nil when past.
    private func millisecondsLeft(until deadline: DispatchTime) -> Int? {
        guard deadline != .distantFuture else { return 0 }
        let now = DispatchTime.now().uptimeNanoseconds
        guard deadline.uptimeNanoseconds > now + 1_000_000 else { return nil }
        return Int((deadline.uptimeNanoseconds - now) / 1_000_000)
    }
}
