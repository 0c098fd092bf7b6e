import EncFSCore
import EncFSService

/// How a bundle is served: every setting of a mount except the bundle's
/// contents and its key, as `encfs-mount` parsed them.
///
/// The foreground command serves with it directly; the background daemon
/// gets it through its argv (`MountCommand` writes and parses that argv,
/// so an option added there is added in both directions in one file).
/// Paths are absolute: the daemon works from "/".
package struct MountConfiguration: Sendable, Equatable {
    /// The bundle's path, for the file system source (`fsname`) and
    /// messages; the daemon serves the descriptor it was handed.
    package var bundlePath: [UInt8]
    /// Where the bundle is mounted.
    package var mountpoint: [UInt8]
    /// Extra `-o` options, one per element.
    package var fuseOptions: [String] = []
    /// Where log lines go (`--log-file`); nil: stderr in the foreground,
    /// syslog in the background.
    package var logFile: [UInt8]?
    /// Kernel read-ahead to set (`--readahead`); nil leaves the kernel's.
    package var readaheadKB: Int?
    /// Memory for decrypted index pages (`--index-cache`).
    package var indexCacheKB: Int
    /// Worker threads (`--threads`).
    package var threads: Int
    /// Whether log lines may name entries (`--log-names`).
    package var logNames = false
    /// Whether symlinks that point outside the bundle are served as stored
    /// (`--allow-external-symlinks`); otherwise the bundle is refused.
    package var allowsExternalSymlinks = false
    /// What the bundle's origin must be (`--verify-key`,
    /// `--expect-bundle-id`): the daemon checks it again when it loads the
    /// index, since the signature covers the index.
    package var origin = OriginPolicy()
    /// Who may open, and whether reads are checked (`--allow-uid`,
    /// `--allow-gid`, `--allow-exe`, `--allow-cgroup`, `--enforce-reads`).
    package var access = AccessRules()
    /// How the mount locks and where its control socket goes
    /// (`--protection`, `--idle-lock`, `--start-locked`).
    package var lock = LockSettings()
    /// Which transport carries requests (`--transport`; by default
    /// classic).
    package var transport = TransportRequest.automatic
    /// How long the classic loop polls for the next request, in
    /// microseconds, 0 for never (`--poll-us`, ``RequestPoller``).
    package var pollMicroseconds = RequestPoller.defaultMicroseconds
    /// Whether `--poll-us` was given: the rings poll only then, having
    /// measured slower with polling on a loaded machine (docs/PERFORMANCE.md,
    /// "Polling for the next request").
    package var pollMicrosecondsGiven = false
    /// Whether reads may wait on a network (a remote bundle): such a mount
    /// is served classic (``MountSession/classicReason(autoUnmount:waitsOnNetwork:)``).
    /// Not passed to the daemon: it parses the same remote settings.
    package var waitsOnNetwork = false

    package init(bundlePath: [UInt8], mountpoint: [UInt8], indexCacheKB: Int, threads: Int) {
        self.bundlePath = bundlePath
        self.mountpoint = mountpoint
        self.indexCacheKB = indexCacheKB
        self.threads = threads
    }
}
