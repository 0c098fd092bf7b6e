import CProcess
#if canImport(Glibc)
import Glibc
#endif

/// Process-wide settings that keep secrets out of core dumps and other
/// users' debuggers, the daemon's process name, and the privileges a root
/// daemon gives up once mounted.
///
/// Here rather than in the command-line layer because `prctl` is variadic
/// and only a C shim can call it; the CFuse shim is this package's one
/// shim for system calls, and every tool's entry point reaches this module
/// through EncFSCLI.
package enum ProcessHardening {
    /// Turns off core dumps for this process: `prctl(PR_SET_DUMPABLE, 0)`
    /// and `RLIMIT_CORE` 0.
    ///
    /// Non-dumpable also keeps other users' `ptrace` and `/proc/PID/mem`
    /// out and hands the process's `/proc/PID` files to root. Both settings
    /// survive `fork`; `execve` resets dumpable, so a re-executed daemon
    /// calls this again (every tool does, first thing). `RLIMIT_CORE` alone
    /// would not do: a `core_pattern` that pipes to a program ignores it.
    package static func disableCoreDumps() {
        _ = cprocess_disable_dumpable()
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
    }

    /// Sets this process's name (`/proc/PID/comm`, what `ps -o comm`,
    /// `pgrep` and `killall` match); the kernel keeps 15 bytes. The
    /// corresponding C call is `prctl(PR_SET_NAME)`.
    package static func setProcessName(_ name: String) {
        _ = name.withCString { cprocess_set_process_name($0) }
    }

    /// Capabilities a daemon running as root keeps once it serves:
    /// `CAP_SYS_ADMIN` to unmount at exit (libfuse's `umount2` when the
    /// daemon is stopped by a signal), `CAP_IPC_LOCK` to lock key memory
    /// at an unlock beyond `RLIMIT_MEMLOCK` (and the rings' buffers), and,
    /// when `ptrace` says so, `CAP_SYS_PTRACE`: the access policy reads
    /// other users' `/proc/PID/exe` and `/proc/PID/ns`, which the kernel
    /// allows only to who could trace them.
    static func capabilitiesKept(ptrace: Bool) -> UInt64 {
        let kept: [Int32] = [CAP_SYS_ADMIN, CAP_IPC_LOCK] + (ptrace ? [CAP_SYS_PTRACE] : [])
        return kept.reduce(0) { $0 | (1 << UInt64($1)) }
    }

    /// Gives up what a root daemon no longer needs once it is mounted:
    /// sets `NoNewPrivs` (nothing it executes can gain privileges, setuid
    /// or file capabilities) and keeps only ``capabilitiesKept(ptrace:)``
    /// of its capabilities, in the bounding set too. Nothing for a daemon
    /// that does not run as root: it has no capabilities, and `NoNewPrivs`
    /// would keep the setuid `fusermount3` it runs to unmount at exit from
    /// working.
    ///
    /// - Parameter ptrace: whether the access policy needs other users' /proc.
    /// - Returns: what could not be done, for a warning; nil when all was.
    package static func dropPrivilegesAfterMounting(keepingPtrace ptrace: Bool) -> String? {
        guard geteuid() == 0 else { return nil }
        guard cprocess_set_no_new_privs() == 0 else { return "cannot set no_new_privs (errno \(errno))" }
        let keep = capabilitiesKept(ptrace: ptrace) & cprocess_permitted_capabilities()
        // The bounding set first: dropping from it needs CAP_SETPCAP, which
        // goes with the rest below. EINVAL: past the kernel's last capability.
        for capability in Int32(0)..<64 where keep & (1 << UInt64(capability)) == 0 {
            if cprocess_drop_bounding_capability(capability) != 0, errno != EINVAL {
                return "cannot drop capability \(capability) from the bounding set (errno \(errno))"
            }
        }
        _ = cprocess_clear_ambient_capabilities()
        guard cprocess_keep_capabilities(keep) == 0 else { return "cannot drop capabilities (errno \(errno))" }
        return nil
    }
}
