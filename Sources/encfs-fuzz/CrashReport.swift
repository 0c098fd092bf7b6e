#if canImport(Glibc)
import Glibc
#endif

/// Names the input being replayed when the process dies of a signal (a
/// Swift trap is SIGILL or SIGTRAP), so a failing regression run says which
/// file to look at.
enum CrashReport {
    /// "encfs-fuzz: crashed on <input>\n", formatted before the input runs
    /// so the signal handler only calls write(2). Replay is single-threaded.
    nonisolated(unsafe) private static var message: UnsafeMutableBufferPointer<CChar>?

    /// Installs the handler for the fatal signals; each one re-raises.
    static func install() {
        for signal in [SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                if let message = CrashReport.message, let base = message.baseAddress {
                    _ = write(2, base, message.count)
                }
                raise(signal) // SA_RESETHAND restored the default action
            }
            action.sa_flags = Int32(bitPattern: SA_RESETHAND) | SA_NODEFER
            sigaction(signal, &action, nil)
        }
    }

    /// Records the input about to run.
    static func current(_ input: String) {
        let text = Array("encfs-fuzz: crashed on \(input)\n".utf8CString.dropLast())
        let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: text.count)
        _ = buffer.initialize(from: text)
        let old = message
        message = buffer
        old?.deallocate()
    }
}
