import EncFSCore
import EncFSService
import CFuse
#if canImport(Glibc)
import Glibc
#endif

/// The one place that decides what a caller may do with an entry it
/// opens, and, with `--enforce-reads`, reads.
///
/// Every `open` and `opendir` the kernel sends asks ``refusal(of:to:by:)``
/// before it is answered in any other way (see `FUSEOperations+Open.swift`).
/// The mount's own rule always holds: anything that would write is refused
/// with EROFS. Without `--allow-*` rules (``AccessRules``) that is all, and
/// who may read is the kernel's decision alone: `default_permissions`
/// checks the stored mode bits with every entry owned by the user who
/// mounted, and without `allow_other` only that user reaches the mount.
///
/// With rules, a caller that does not match them is answered EACCES and
/// logged (``DenialLog``). For that to mean anything the kernel must ask
/// at every open: ``answersEveryOpen`` keeps opens from being skipped (a
/// kernel that can skip them is otherwise answered ENOSYS once and stops
/// sending them). Nothing is decided at `lookup` or `getattr`, whose
/// answers the kernel caches for every caller, and nothing about a caller
/// is remembered between requests: each open reads /proc again
/// (``CallerProcess``).
///
/// An open, once allowed, hands the caller a descriptor the kernel then
/// serves from: reads through it, by the caller or by whoever inherits or
/// receives it, are not asked about, unless `--enforce-reads` makes every
/// read come here (direct I/O) and ask again.
struct AccessPolicy: Sendable {
    /// The rules and the allowed programs, shared with encfs-serve.
    let admission: CallerAdmission
    var rules: AccessRules { admission.rules }
    private let denials: DenialLog
    /// The daemon's own user and mount namespaces (see ``CallerAdmission``).
    var namespaces: CallerProcess.Namespaces? { admission.namespaces }

    /// Records the allowed programs and the daemon's namespaces; a program
    /// that cannot be opened any more is logged and matches nobody.
    init(rules: AccessRules, logger: MountLogger, failures: FailurePolicy) {
        admission = CallerAdmission(rules: rules) { logger.log("warning", $0) }
        denials = DenialLog(logger: logger, failures: failures, namespaces: admission.namespaces)
    }

    /// Whether every open and opendir must be answered by the daemon, never
    /// with ENOSYS (which lets the kernel skip all later opens): whenever
    /// any rule decides per caller.
    var answersEveryOpen: Bool { rules.restrictsCallers || rules.enforcesReads }

    /// Whether reads are checked too (`--enforce-reads`): opens then reply
    /// with direct I/O, so every read reaches the daemon.
    var checksReads: Bool { rules.enforcesReads }

    /// The process behind a request, as the kernel reports it.
    struct Caller: Sendable, Equatable {
        let uid: uid_t
        let gid: gid_t
        /// Thread id of the caller, in the daemon's pid namespace (0 for a
        /// caller outside it).
        let pid: pid_t

        /// The caller of `req`. The corresponding C function is `fuse_req_ctx`.
        init(_ req: fuse_req_t?) {
            guard let req, let context = fuse_req_ctx(req) else {
                self.init(uid: uid_t.max, gid: gid_t.max, pid: 0)
                return
            }
            self.init(uid: context.pointee.uid, gid: context.pointee.gid, pid: context.pointee.pid)
        }

        init(uid: uid_t, gid: gid_t, pid: pid_t) {
            self.uid = uid
            self.gid = gid
            self.pid = pid
        }
    }

    /// What a caller asks for.
    enum Request: Sendable, Equatable {
        /// `open` of a file with these `open(2)` flags.
        case open(flags: Int32)
        /// `opendir` of a directory.
        case openDirectory
        /// `read` of an open file (only asked with `--enforce-reads`).
        case read

        /// How a log line names it.
        var verb: String {
            switch self {
            case .open: "open of"
            case .openDirectory: "opendir of"
            case .read: "read of"
            }
        }
    }

    /// Why `caller` may not do `request` to `entry`, as an errno; nil when
    /// it may. A refusal by the rules is logged (rate-limited).
    func refusal(of request: Request, to entry: IndexEntry, by caller: Caller) -> Int32? {
        if case .open(let flags) = request {
            // The `ro` mount makes the kernel refuse these first; this is
            // the second line, for whatever gets past it.
            let writes = flags & O_ACCMODE != O_RDONLY || flags & (O_TRUNC | O_CREAT) != 0
            if writes { return EROFS }
        }
        guard rules.restrictsCallers, !admits(caller) else { return nil }
        denials.record(request, of: entry, by: caller)
        return EACCES
    }

    /// Whether `caller` matches every kind of rule (``CallerAdmission``).
    func admits(_ caller: Caller) -> Bool {
        admission.admits(uid: caller.uid, gid: caller.gid, pid: caller.pid)
    }
}
