import EncFSCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

// `-o auto_unmount`: libfuse starts fusermount3, which stays and unmounts
// once the daemon's end of a socket pair closes, but only when opening the
// mountpoint then fails with ENOTCONN (fusermount3 3.14,
// `should_auto_unmount`). A killed daemon's descriptors are released one
// after the other; if the socket goes first, fusermount3 can open the
// mountpoint while the connection is still up, its OPENDIR then ends with
// ECONNABORTED when /dev/fuse is released a moment later, and the mount
// stays (seen on a loaded machine; MountTests/ReadinessTests). So the
// device must be released before the socket.
extension MountSession {
    /// A copy of the mount's /dev/fuse descriptor numbered above every
    /// descriptor open now, fusermount3's socket among them; the caller
    /// keeps it as long as the session.
    ///
    /// The file is released when its last descriptor closes. An exiting
    /// process closes its descriptors in ascending order, and the kernel
    /// runs the deferred releases last-closed first (`task_work_run`
    /// takes its list newest first; the order is not an ABI, hence the
    /// test): with the highest-numbered copy, the device, and with it the
    /// connection, goes before the socket. Best effort: nil changes
    /// nothing but this ordering.
    static func deviceCopyReleasedFirst(of session: OpaquePointer) -> FileDescriptor? {
        let device = fuse_session_fd(session)
        guard device >= 0 else { return nil }
        let copy = fcntl(device, F_DUPFD_CLOEXEC, highestOpenDescriptor() + 1)
        return copy >= 0 ? FileDescriptor(taking: copy) : nil
    }

    /// The highest descriptor number open in this process (from
    /// /proc/self/fd), 0 when that cannot be listed.
    private static func highestOpenDescriptor() -> Int32 {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var highest: Int32 = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let number = Int32(name), number > highest { highest = number }
        }
        return highest
    }
}
