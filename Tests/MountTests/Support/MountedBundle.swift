import Foundation
#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// One mount made by a test.
///
/// The test that made it registered ``unmount(mountpoint:foreground:)`` as
/// a teardown block before the mount command ran, so it is taken down even
/// when the test fails half-way.
final class MountedBundle: Sendable {
    let bundle: String
    /// Absolute mountpoint.
    let mountpoint: String
    /// The `--log-file`, if one was given.
    let logFile: String?
    /// The `encfs-mount -f` process, for foreground mounts.
    let foreground: SpawnedProcess?
    /// The process serving the mount: the foreground process, or the
    /// background daemon found in /proc.
    let daemonPID: pid_t?
    /// Seconds from starting `encfs-mount` until the mount answered statfs.
    let secondsToServe: Double

    init(bundle: String, mountpoint: String, logFile: String?, foreground: SpawnedProcess?, daemonPID: pid_t?,
         secondsToServe: Double) {
        self.bundle = bundle
        self.mountpoint = mountpoint
        self.logFile = logFile
        self.foreground = foreground
        self.daemonPID = daemonPID
        self.secondsToServe = secondsToServe
    }

    /// `mountpoint/relative`.
    func path(_ relative: String) -> String { "\(mountpoint)/\(relative)" }

    /// The log file's lines (empty without a log file).
    func logLines() -> [String] {
        guard let logFile, let data = FileManager.default.contents(atPath: logFile) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Takes a mount down whatever state it is in; safe to call twice.
    ///
    /// `fusermount3 -u`; if the mount is still there after 5 s (busy),
    /// `fusermount3 -uz`; then the daemon gets 5 s to exit on its own before
    /// SIGTERM and SIGKILL; a mount left dead by a killed daemon is detached
    /// lazily at the end.
    ///
    /// - Returns: notes on every fallback that was needed (empty when a plain
    ///   unmount did it).
    @discardableResult
    static func unmount(mountpoint: String, foreground: SpawnedProcess?) -> [String] {
        var notes: [String] = []
        let daemon = foreground?.pid ?? ProcessTable.daemon(servingAt: mountpoint)
        if MountTable.isMounted(mountpoint) {
            let result = try? Subprocess.run(Tools.fusermount, ["-u", mountpoint], timeout: 15)
            if !Deadline.poll(seconds: 5, { !MountTable.isMounted(mountpoint) }) {
                notes.append("fusermount3 -u did not unmount (\(result?.errorOutput ?? "not run")); used -uz")
                _ = try? Subprocess.run(Tools.fusermount, ["-uz", mountpoint], timeout: 15)
                _ = Deadline.poll(seconds: 5) { !MountTable.isMounted(mountpoint) }
            }
        }
        if let foreground {
            if foreground.wait(deadline: Deadline(seconds: 5)) == nil {
                notes.append("foreground encfs-mount \(foreground.pid) still ran after the unmount; killed")
                foreground.signal(SIGTERM)
                if foreground.wait(deadline: Deadline(seconds: 3)) == nil {
                    foreground.signal(SIGKILL)
                    _ = foreground.wait(deadline: Deadline(seconds: 5))
                }
            }
        } else if let daemon, !Deadline.poll(seconds: 5, { !ProcessTable.isAlive(daemon) }) {
            notes.append("daemon \(daemon) still ran after the unmount; killed")
            kill(daemon, SIGTERM)
            if !Deadline.poll(seconds: 3, { !ProcessTable.isAlive(daemon) }) {
                kill(daemon, SIGKILL)
                _ = Deadline.poll(seconds: 5) { !ProcessTable.isAlive(daemon) }
            }
        }
        if MountTable.isMounted(mountpoint) {
            notes.append("mount still present after the daemon ended; used -uz")
            _ = try? Subprocess.run(Tools.fusermount, ["-uz", mountpoint], timeout: 15)
        }
        return notes
    }
}
