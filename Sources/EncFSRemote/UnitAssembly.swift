import Synchronization

/// The requests that fetch one unit's bytes in pieces at the same time (a
/// cold read's own chunks, and the bytes before and after them), and who
/// finishes last: that one stores the unit whole, or records the failure,
/// and releases the unit's claim (``RemoteBundleSource``).
///
/// Why at the same time: a rest asked for only after the read's own
/// chunks returned made every read that landed in it wait two round trips
/// (docs/PERFORMANCE.md, remote bundles).
final class UnitAssembly: Sendable {
    private struct State {
        var pending: Int
        var failure: RemoteError?
    }

    private let state: Mutex<State>

    /// - Parameter pieces: how many requests fetch the unit.
    init(pieces: Int) {
        state = Mutex(State(pending: max(1, pieces)))
    }

    /// Records that one piece arrived (`failure` nil) or failed.
    ///
    /// - Returns: nil while other pieces are on the way; for the last
    ///   piece, the first failure of any piece, or `.success`.
    func finish(_ failure: RemoteError?) -> Result<Void, RemoteError>? {
        state.withLock { state in
            if state.failure == nil { state.failure = failure }
            state.pending -= 1
            guard state.pending == 0 else { return nil }
            if let failure = state.failure { return .failure(failure) }
            return .success(())
        }
    }
}
