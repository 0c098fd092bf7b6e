import CFuse
#if canImport(Glibc)
import Glibc
#endif

/// Process-wide settings that keep secrets out of core dumps and other
/// users' debuggers, and the daemon's process name.
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
        _ = cfuse_disable_dumpable()
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
    }

    /// Sets this process's name (`/proc/PID/comm`, what `ps -o comm`,
    /// `pgrep` and `killall` match); the kernel keeps 15 bytes. The
    /// corresponding C call is `prctl(PR_SET_NAME)`.
    package static func setProcessName(_ name: String) {
        _ = name.withCString { cfuse_set_process_name($0) }
    }
}
