import EncFSCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

/// The one place that decides what a caller may do with an entry it opens.
///
/// Every `open` and `opendir` the kernel sends asks ``refusal(of:to:by:)``
/// before it is answered in any other way (see `FUSEOperations+Open.swift`).
/// Today the policy is the mount's own: reading is allowed, anything that
/// would write is refused with EROFS. Who may read is decided before a
/// request gets here, by the kernel: `default_permissions` checks the
/// stored mode bits with every entry owned by the user who mounted, and
/// without `allow_other` only that user reaches the mount at all.
///
/// What reaches this hook, honestly: on kernels that can skip opens
/// (files 4.19+, directories 5.1+) the first open and the first opendir
/// the policy allows are answered ENOSYS, and the kernel sends no further
/// opens of that kind for the life of the mount. So today the hook sees
/// one open and one opendir per mount, plus any it refuses. A policy that
/// refuses some callers (by uid, gid or executable) must first change
/// that: answer every open itself (two more round trips per opened file),
/// or check at `lookup`, whose answers the kernel caches for every caller
/// (entry timeouts are infinite) and so would need short timeouts too.
/// Neither is built; this type is where such a policy goes.
struct AccessPolicy: Sendable {
    /// The process behind a request, as the kernel reports it.
    struct Caller: Sendable, Equatable {
        let uid: uid_t
        let gid: gid_t
        /// Thread id of the caller (0 when the kernel does not know it).
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
    }

    /// Why `caller` may not do `request` to `entry`, as an errno; nil when
    /// it may.
    func refusal(of request: Request, to entry: IndexEntry, by caller: Caller) -> Int32? {
        switch request {
        case .open(let flags):
            // The `ro` mount makes the kernel refuse these first; this is
            // the second line, for whatever gets past it.
            let writes = flags & O_ACCMODE != O_RDONLY || flags & (O_TRUNC | O_CREAT) != 0
            return writes ? EROFS : nil
        case .openDirectory:
            return nil
        }
    }
}
