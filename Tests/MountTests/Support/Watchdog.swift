import Foundation
import SharedTestSupport
import Synchronization

/// Turns a hang into a failure: a background thread that ends the test
/// process when ``tick(_:)`` has not been called for `limit` seconds.
///
/// For loops that call the library in-process (no subprocess deadline can
/// stop a hung call there). The limit is a hang detector, not a timing
/// threshold: one step normally takes milliseconds.
final class Watchdog: Sendable {
    private let state = Mutex<(count: Int, label: String, stopped: Bool)>((0, "start", false))

    /// Starts watching.
    ///
    /// - Parameter limit: seconds without a tick that count as a hang.
    init(limit: Int) {
        let thread = Thread { [self] in
            var last = -1
            var idle = 0
            while true {
                sleep(1)
                let (count, label, stopped) = self.state.withLock { $0 }
                if stopped { return }
                if count != last {
                    last = count
                    idle = 0
                    continue
                }
                idle += 1
                if idle >= limit {
                    fatalError("hang: no progress for \(limit) s at step \(count) (\(label))")
                }
            }
        }
        thread.start()
    }

    /// Records progress, naming the step that starts now.
    func tick(_ label: String) {
        state.withLock { $0.count += 1; $0.label = label }
    }

    /// Ends the watch.
    func stop() {
        state.withLock { $0.stopped = true }
    }
}
