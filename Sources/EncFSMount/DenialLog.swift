import EncFSCore
import Synchronization
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// Logs the access policy's refusals, rate-limited so that no caller can
/// flood the log or grow the daemon's memory.
///
/// A line gives the caller's uid, pid (the thread the kernel named) and
/// executable, and the inode it asked for; the entry's path only with
/// `--log-names` (names are as secret as contents, see ``FailurePolicy``).
///
/// Everything a refused caller chooses is bounded: the executable's path
/// (any name the caller gives a copy or a link of a program) is cut to
/// ``maximumShownPath`` bytes; one (executable, uid) is logged once per
/// ``interval``; one uid gets at most ``linesPerUID`` lines per interval,
/// the last followed by one saying the rest are not logged; the tables hold at most
/// ``maximumRemembered`` entries each, and when the uid table is full of
/// recent uids nothing more is logged until one expires, after one line
/// that says so. So at most `maximumRemembered · (linesPerUID + 1) + 1`
/// lines an interval, whatever the callers do.
final class DenialLog: Sendable {
    /// Who was refused, for rate limiting.
    private struct Key: Hashable {
        let executable: [UInt8]
        let uid: uid_t
    }

    /// Lines logged for one uid in its current interval.
    private struct Window {
        var start: ContinuousClock.Instant
        var lines: Int
    }

    private struct State {
        /// When each (executable, uid) was last logged.
        var lastLogged: [Key: ContinuousClock.Instant] = [:]
        /// Each recent uid's lines.
        var windows: [uid_t: Window] = [:]
        /// When "too many users" was last logged.
        var overflowLogged: ContinuousClock.Instant?
    }

    /// What to log for one refusal.
    private enum Verdict: Equatable {
        /// Nothing: logged recently enough.
        case none
        /// The refusal.
        case line
        /// The refusal, then that this uid's next ones are not logged.
        case lineAndUIDSuppressed
        /// Only that refusals of too many users are not logged.
        case overflow
    }

    private let logger: MountLogger
    private let failures: FailurePolicy
    private let namespaces: CallerProcess.Namespaces?
    private let state = Mutex(State())
    /// One line per key per this long.
    static let interval = Duration.seconds(60)
    /// Most lines per uid per ``interval`` (one more says the rest are not logged).
    static let linesPerUID = 10
    /// Most entries in each table.
    static let maximumRemembered = 256
    /// Most bytes of an executable's path kept and shown (the end: the
    /// program's name).
    static let maximumShownPath = 256

    /// - Parameter namespaces: the daemon's, to say when a caller is in others.
    init(logger: MountLogger, failures: FailurePolicy, namespaces: CallerProcess.Namespaces?) {
        self.logger = logger
        self.failures = failures
        self.namespaces = namespaces
    }

    /// Logs that `caller` was refused `request` on `entry`, within the limits.
    ///
    /// Runs only on a refusal, so it may allocate; it reads the caller's
    /// executable for the line even when no executable rule asked for it.
    func record(_ request: AccessPolicy.Request, of entry: IndexEntry, by caller: AccessPolicy.Caller) {
        let found = CallerProcess.withIdentity(ofThread: caller.pid, readingExecutable: true, readingCgroup: false) { exe, _ in
            (Array(exe.path.suffix(Self.maximumShownPath)), exe.path.count > Self.maximumShownPath, exe.namespaces)
        }
        let verdict = decide(Key(executable: found?.0 ?? [], uid: caller.uid), at: .now)
        guard verdict != .none else { return }
        if verdict == .overflow {
            logger.log("warning", "access denied to callers of too many user ids: no more denials logged for up to a minute")
            return
        }
        var shown = found.map { String(decoding: MountLogger.escaped($0.0), as: UTF8.self) } ?? "unknown"
        if found?.1 == true { shown = "..." + shown }
        if let found, found.2 != namespaces { shown += " (in another user or mount namespace)" }
        let inode = entry.position + 1
        logger.log("warning", "access denied: uid \(caller.uid), gid \(caller.gid), pid \(caller.pid), exe \(shown), "
                   + "\(request.verb) inode \(inode), returning EACCES", path: failures.loggableName(ofEntryAt: entry.position))
        if verdict == .lineAndUIDSuppressed {
            logger.log("warning", "access denied to uid \(caller.uid) more often: no more of its denials logged for up to a minute")
        }
    }

    /// Whether and how to log a refusal of `key` at `now`, counting it.
    private func decide(_ key: Key, at now: ContinuousClock.Instant) -> Verdict {
        state.withLock { state -> Verdict in
            if let last = state.lastLogged[key], now - last < Self.interval { return .none }
            var window = state.windows[key.uid] ?? Window(start: now, lines: 0)
            if now - window.start >= Self.interval { window = Window(start: now, lines: 0) }
            if state.windows[key.uid] == nil, state.windows.count >= Self.maximumRemembered {
                state.windows = state.windows.filter { now - $0.value.start < Self.interval }
                if state.windows.count >= Self.maximumRemembered {
                    if let last = state.overflowLogged, now - last < Self.interval { return .none }
                    state.overflowLogged = now
                    return .overflow
                }
            }
            guard window.lines < Self.linesPerUID else { return .none }
            window.lines += 1
            state.windows[key.uid] = window
            if state.lastLogged.count >= Self.maximumRemembered {
                state.lastLogged = state.lastLogged.filter { now - $0.value < Self.interval }
            }
            // A full table of recent keys: the per-uid limit still holds.
            if state.lastLogged.count < Self.maximumRemembered { state.lastLogged[key] = now }
            return window.lines == Self.linesPerUID ? .lineAndUIDSuppressed : .line
        }
    }
}
