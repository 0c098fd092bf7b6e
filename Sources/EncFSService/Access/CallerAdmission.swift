import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Whether a caller passes the `--allow-uid/--allow-gid/--allow-exe/--allow-cgroup`
/// rules: the one decision the mount (every open, through `AccessPolicy`)
/// and encfs-serve (every unix-socket connection, by `SO_PEERCRED`) share.
///
/// Built once when the service starts: the allowed programs are opened
/// and recorded then (``AllowedExecutable``), and the service's own user
/// and mount namespaces read. Nothing about a caller is remembered: each
/// question reads /proc again (``CallerProcess``).
package struct CallerAdmission: Sendable {
    package let rules: AccessRules
    /// The `--allow-exe` programs as found at start (one per path that
    /// could be opened then).
    private let executables: [AllowedExecutable]
    /// The service's own user and mount namespaces: an executable rule
    /// admits only callers in both (nil, when they cannot be read: none).
    package let namespaces: CallerProcess.Namespaces?

    /// Records the allowed programs and this process's namespaces; a
    /// program that cannot be opened any more is reported through `warn`
    /// and matches nobody.
    package init(rules: AccessRules, warn: (String) -> Void) {
        self.rules = rules
        namespaces = CallerProcess.namespaces(of: getpid())
        executables = rules.executables.compactMap { path in
            do { return try AllowedExecutable(path: path) } catch {
                warn("--allow-exe program cannot be opened, so it matches no caller: \((error as? BundleError)?.message ?? "\(error)")")
                return nil
            }
        }
    }

    /// Whether the caller (`uid`, `gid`, and `pid`: a thread id in this
    /// process's pid namespace, 0 when unknown) matches every kind of
    /// rule: the ids first (free), then, only when an executable or cgroup
    /// rule asks, the process itself. A caller that cannot be identified
    /// (pid 0; gone; no executable) matches no executable or cgroup rule.
    package func admits(uid: uid_t, gid: gid_t, pid: pid_t) -> Bool {
        guard rules.admits(uid: uid, gid: gid) else { return false }
        guard rules.needsCallerProcess else { return true }
        let admitted = CallerProcess.withIdentity(ofThread: pid, readingExecutable: !rules.executables.isEmpty,
                                                  readingCgroup: !rules.cgroups.isEmpty) { executable, cgroup in
            admits(executable) && rules.admits(cgroup: cgroup)
        }
        return admitted ?? false
    }

    /// Whether `executable` passes the executable rule: one of the allowed
    /// files, run from its path, by a process in this process's own user
    /// and mount namespaces. In a user namespace of its own a process may
    /// bind-mount any program over an allowed path, or make
    /// `/proc/PID/exe` name an allowed file (`PR_SET_MM_MAP`); in a mount
    /// namespace only root could make, paths may lead elsewhere.
    private func admits(_ executable: CallerProcess.Executable) -> Bool {
        guard !rules.executables.isEmpty else { return true }
        guard let namespaces, executable.namespaces == namespaces else { return false }
        return executables.contains { $0.matches(executable) }
    }
}
