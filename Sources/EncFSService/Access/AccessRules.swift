#if canImport(Glibc)
import Glibc
#endif

/// Who may open the mount's files (`--allow-uid`, `--allow-gid`,
/// `--allow-exe`, `--allow-cgroup`) and whether reads are checked too
/// (`--enforce-reads`), as `encfs-mount` parsed them.
///
/// A caller must match every kind that has values (uid AND gid AND
/// executable AND cgroup), and any one value within a kind. With no values
/// at all the kernel alone decides, as it always did: the mounting user,
/// or everyone with `-o allow_other`, subject to the stored mode bits.
package struct AccessRules: Sendable, Equatable {
    /// Allowed callers' user ids (the request's fsuid).
    package var uids: [uid_t] = []
    /// Allowed callers' group ids (the request's fsgid; supplementary
    /// groups are not considered).
    package var gids: [gid_t] = []
    /// Allowed executables: absolute paths, symlinks resolved. The daemon
    /// records the file at each when it mounts (``AllowedExecutable``).
    package var executables: [[UInt8]] = []
    /// Allowed cgroup v2 paths (as in `/proc/PID/cgroup`, `0::/PATH`); a
    /// caller in the cgroup or any cgroup below it matches.
    package var cgroups: [[UInt8]] = []
    /// Check the caller on every read too, not only at open, and serve
    /// plaintext with direct I/O (no page cache).
    package var enforcesReads = false

    package init() {}

    /// Whether any rule restricts who may open.
    package var restrictsCallers: Bool {
        !uids.isEmpty || !gids.isEmpty || !executables.isEmpty || !cgroups.isEmpty
    }

    /// Whether deciding needs the calling process itself (its executable
    /// or cgroup, read from /proc), not just the ids the kernel sends.
    package var needsCallerProcess: Bool { !executables.isEmpty || !cgroups.isEmpty }

    /// Whether these rules let in users other than the one who mounts, so
    /// the kernel must be told `allow_other` (without it, the kernel
    /// refuses every other user before a request reaches the daemon): an
    /// allowed uid that is not `mountingUID`, or, with no uid rule, an
    /// allowed gid that is not `mountingGID` (its members may be anyone).
    package func needsAllowOther(mountingUID: uid_t, mountingGID: gid_t) -> Bool {
        if !uids.isEmpty { return uids.contains { $0 != mountingUID } }
        return gids.contains { $0 != mountingGID }
    }

    /// Whether `uid` and `gid` pass the uid and gid rules.
    package func admits(uid: uid_t, gid: gid_t) -> Bool {
        (uids.isEmpty || uids.contains(uid)) && (gids.isEmpty || gids.contains(gid))
    }

    /// Whether `cgroup` (a cgroup v2 path such as `/system.slice/x.service`)
    /// passes the cgroup rule: equal to an allowed path, or below it.
    package func admits(cgroup: UnsafeRawBufferPointer) -> Bool {
        cgroups.isEmpty || cgroups.contains { Self.cgroup(cgroup, isWithin: $0) }
    }

    /// Whether `path` is `allowed` or lies below it ("/a/b" is within "/a"
    /// and "/", "/ab" is not within "/a").
    package static func cgroup(_ path: UnsafeRawBufferPointer, isWithin allowed: [UInt8]) -> Bool {
        guard path.count >= allowed.count, path.prefix(allowed.count).elementsEqual(allowed) else { return false }
        return path.count == allowed.count || allowed.last == UInt8(ascii: "/") || path[allowed.count] == UInt8(ascii: "/")
    }
}
