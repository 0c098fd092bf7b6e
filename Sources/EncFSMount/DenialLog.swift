import EncFSCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Logs the access policy's refusals: one line per (executable, uid) per
/// minute, so a program retrying in a loop cannot flood the log.
///
/// A line gives the caller's uid, pid (the thread the kernel named) and
/// executable, and the inode it asked for; the entry's path only with
/// `--log-names` (names are as secret as contents, see ``FailurePolicy``).
final class DenialLog: Sendable {
    /// Who was refused, for rate limiting.
    private struct Key: Hashable {
        let executable: [UInt8]
        let uid: uid_t
    }

    private let logger: MountLogger
    private let failures: FailurePolicy
    /// When each (executable, uid) was last logged.
    private let lastLogged = Mutex<[Key: ContinuousClock.Instant]>([:])
    /// One line per key per this long.
    static let interval = Duration.seconds(60)
    /// Beyond this many keys, those older than ``interval`` are dropped.
    static let maximumRemembered = 1024

    init(logger: MountLogger, failures: FailurePolicy) {
        self.logger = logger
        self.failures = failures
    }

    /// Logs that `caller` was refused `request` on `entry`, unless the
    /// same executable and uid were logged less than a minute ago.
    ///
    /// Runs only on a refusal, so it may allocate; it reads the caller's
    /// executable for the line even when no executable rule asked for it.
    func record(_ request: AccessPolicy.Request, of entry: IndexEntry, by caller: AccessPolicy.Caller) {
        let executable = CallerProcess.withIdentity(ofThread: caller.pid, readingExecutable: true, readingCgroup: false) { exe, _ in
            Array(exe)
        }
        let key = Key(executable: executable ?? [], uid: caller.uid)
        let now = ContinuousClock.now
        let due = lastLogged.withLock { table -> Bool in
            if let last = table[key], now - last < Self.interval { return false }
            if table.count >= Self.maximumRemembered { table = table.filter { now - $0.value < Self.interval } }
            table[key] = now
            return true
        }
        guard due else { return }
        let shown = executable.map { String(decoding: MountLogger.escaped($0), as: UTF8.self) } ?? "unknown"
        let inode = entry.position + 1
        logger.log("warning", "access denied: uid \(caller.uid), gid \(caller.gid), pid \(caller.pid), exe \(shown), "
                   + "\(request.verb) inode \(inode), returning EACCES", path: failures.loggableName(ofEntryAt: entry.position))
    }
}
