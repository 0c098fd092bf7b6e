import EncFSCore
import EncFSService
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one place where a failed request becomes an errno and a log line.
///
/// The errno is the error's own (`BundleError.errno`, the only
/// translation; anything that is not a `BundleError` is EIO). The log
/// line names the inode and, for a damaged chunk, the chunk number; never
/// file contents or key bytes, and never the file's name unless the mount
/// was started with `--log-names` (names are as secret as contents). Each
/// distinct failure is logged once per mount: the kernel retries a failed
/// read (readahead, then the page itself) and programs retry too, and one
/// damaged chunk must not flood the log.
final class FailurePolicy: Sendable {
    /// Names entries for `--log-names`; read only from within a request
    /// (``LockableBundle/readerWithinRequest``).
    private let bundle: LockableBundle
    private let logger: MountLogger
    /// Whether log lines may carry the entry's path (`--log-names`).
    private let logNames: Bool
    /// Damaged chunks already logged.
    private let loggedChunks = Mutex<Set<DamagedChunk>>([])
    /// Other failures already logged, by message.
    private let loggedMessages = Mutex<Set<String>>([])
    /// Beyond this many damaged chunks every failure is logged again
    /// rather than remembered, so the set stays bounded.
    static let maximumRememberedChunks = 4096
    /// The same bound for other failures, which differ far less.
    static let maximumRememberedMessages = 64

    init(bundle: LockableBundle, logger: MountLogger, logNames: Bool) {
        self.bundle = bundle
        self.logger = logger
        self.logNames = logNames
    }

    /// The errno to answer `failure` with, after logging it if it is the
    /// first of its kind.
    ///
    /// - Parameters:
    ///   - failure: what the reader or the index threw.
    ///   - inode: the inode the request was about (a damaged chunk names
    ///     its own entry, which is the same file for a read).
    /// - Returns: the errno for the reply.
    func errno(for failure: Error, inode: UInt64) -> Int32 {
        let code = (failure as? BundleError)?.errno ?? EIO
        let codeName = code == EIO ? "EIO" : "errno \(code)"
        if case BundleError.corruptChunk(let position, let chunk) = failure {
            let damaged = DamagedChunk(entry: position, chunk: chunk)
            let first = loggedChunks.withLock { logged in
                logged.count < Self.maximumRememberedChunks ? logged.insert(damaged).inserted : !logged.contains(damaged)
            }
            if first {
                logger.log("error", "chunk \(chunk) of inode \(position + 1) failed authentication, returning \(codeName)",
                           path: loggableName(ofEntryAt: position))
            }
        } else {
            let message = (failure as? BundleError)?.message ?? "\(failure)"
            let first = loggedMessages.withLock { logged in
                logged.count < Self.maximumRememberedMessages ? logged.insert(message).inserted : !logged.contains(message)
            }
            if first {
                logger.log("error", "request for inode \(inode) failed: \(message), returning \(codeName)",
                           path: inode >= 1 ? loggableName(ofEntryAt: Int(clamping: inode - 1)) : nil)
            }
        }
        return code
    }

    /// The path of the entry at `position` when names may be logged
    /// (also for ``DenialLog``); nil otherwise, and while locked.
    func loggableName(ofEntryAt position: Int) -> [UInt8]? {
        guard logNames, let reader = bundle.readerWithinRequest, position >= 0, position < reader.index.count else { return nil }
        // The root's path is empty; "/" reads better in a log line.
        // Built upwards only as far as a log line shows (a chain of nested
        // directories makes paths of any length).
        return (try? reader.index.entry(at: position)).flatMap { try? reader.index.path(of: $0, maximumLength: PrintableText.defaultLimit) }
            .map { $0.isEmpty ? [UInt8(ascii: "/")] : $0 }
    }
}

/// A chunk of an entry, by index position and chunk index.
struct DamagedChunk: Hashable, Sendable {
    let entry: Int
    let chunk: UInt64
}
