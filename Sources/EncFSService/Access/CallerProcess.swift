import CProcess
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// The process behind a FUSE request, read from /proc while a pidfd holds
/// it (the systemd "pidref" pattern).
///
/// The kernel reports the calling **thread's** id, in the daemon's pid
/// namespace (0 for a caller outside it). A thread id opens no pidfd
/// unless it is also the process id, so another thread's id is mapped to
/// its process through the `Tgid:` line of `/proc/TID/status`. Then, in
/// this order: a pidfd of the process is opened, `/proc/PID/exe` and
/// `/proc/PID/cgroup` are read, and the pidfd is asked whether the process
/// has exited. A process that is still there after the reads is the one
/// the pidfd named before them, so the reads were about it and not about
/// a later process that reused its pid.
///
/// What holds the caller still meanwhile: once an `open` or a `read(2)`
/// has reached the daemon, the calling thread waits for the answer in the
/// kernel, beyond the reach even of SIGKILL, and an `execve` by another of
/// its threads waits for it too. So for those the thread, its process and
/// its executable are the same before and after the check. A read the
/// kernel sends for the page cache (a page fault in a private mapping) is
/// the same only because `--enforce-reads` turns asynchronous reads off
/// (`FUSEOperations.initialize`): an asynchronous read-ahead is sent on
/// behalf of a process that may be gone before the daemon sees it, and
/// its pid reused by an allowed program. The pidfd covers the rest: a
/// process that exited during the reads is refused.
///
/// The executable is known by its file (device and inode), not only by
/// the path `/proc/PID/exe` shows: the kernel builds that path in the
/// caller's mount namespace, where a user with a namespace of their own
/// can bind-mount any program over an allowed path.
///
/// Nothing here is remembered between requests: every check reads /proc
/// again, into stack buffers (no allocation).
package enum CallerProcess {
    /// Longest executable path read (PATH_MAX); a longer one matches nothing.
    package static let maximumPathLength = 4096
    /// Most of `/proc/PID/cgroup` read: one line per cgroup v1 hierarchy
    /// plus the v2 line; a larger file matches no cgroup rule.
    package static let maximumCgroupFileLength = 8192
    /// Most of `/proc/TID/status` read: `Tgid:` is its fourth line, after
    /// `Name:` (at most 64 escaped bytes), `Umask:` and `State:`.
    package static let statusPrefixLength = 512
    /// What precedes the process id in `/proc/TID/status`.
    private static let tgidKey = Array("\nTgid:\t".utf8)

    /// A file or namespace as the kernel names it: device and inode.
    package struct FileIdentity: Sendable, Equatable {
        package let device: UInt64
        package let inode: UInt64

        package init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }

        package init(_ st: stat) {
            self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        }
    }

    /// A process's user and mount namespaces (`/proc/PID/ns/user`,
    /// `/proc/PID/ns/mnt`).
    package struct Namespaces: Sendable, Equatable {
        package let user: FileIdentity
        package let mount: FileIdentity
    }

    /// The caller's program, as the daemon sees it.
    package struct Executable {
        /// `/proc/PID/exe` read as a link. The kernel builds this path in
        /// the caller's mount namespace, so on its own it proves nothing:
        /// a caller that can bind-mount (in a user namespace of its own)
        /// shows any path it likes.
        package let path: UnsafeRawBufferPointer
        /// The file the process runs (`stat` of `/proc/PID/exe`, which
        /// follows the link to the file whatever the namespace).
        package let file: FileIdentity
        /// The process's user and mount namespaces.
        package let namespaces: Namespaces

        /// Nothing read (no executable rule asked).
        package static var none: Executable {
            let nothing = FileIdentity(device: 0, inode: 0)
            return Executable(path: UnsafeRawBufferPointer(start: nil, count: 0), file: nothing,
                              namespaces: Namespaces(user: nothing, mount: nothing))
        }
    }

    /// Calls `body` with the executable and the cgroup v2 path of the
    /// process behind thread `tid`, each read only when asked for (``Executable/none``
    /// and empty otherwise).
    ///
    /// - Returns: what `body` returns, or nil when the process cannot be
    ///   identified: `tid` is 0 (outside the daemon's pid namespace), the
    ///   process is gone or has no executable (a kernel thread), its
    ///   namespaces cannot be read, a path does not fit, there is no cgroup
    ///   v2 line, or the process exited during the reads.
    package static func withIdentity<R>(ofThread tid: pid_t, readingExecutable: Bool, readingCgroup: Bool,
                                _ body: (_ executable: Executable, _ cgroup: UnsafeRawBufferPointer) -> R) -> R? {
        guard tid > 0, let (pidfd, pid) = openProcess(ofThread: tid) else { return nil }
        // Raw, closed here: this check allocates nothing (a FileDescriptor is a class).
        defer { close(pidfd) }
        return withUnsafeTemporaryAllocation(byteCount: maximumPathLength + maximumCgroupFileLength, alignment: 1) { scratch -> R? in
            var executable = Executable.none
            var cgroup = UnsafeRawBufferPointer(start: nil, count: 0)
            if readingExecutable {
                let buffer = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<maximumPathLength])
                guard let path = readExecutable(of: pid, into: buffer), let file = identity(of: pid, "exe"),
                      let namespaces = namespaces(of: pid) else { return nil }
                executable = Executable(path: path, file: file, namespaces: namespaces)
            }
            if readingCgroup {
                let buffer = UnsafeMutableRawBufferPointer(rebasing: scratch[maximumPathLength...])
                guard let found = readCgroup(of: pid, into: buffer) else { return nil }
                cgroup = found
            }
            guard cprocess_pidfd_has_exited(pidfd) == 0 else { return nil }
            return body(executable, cgroup)
        }
    }

    /// The user and mount namespaces of process `pid` (of the daemon itself
    /// for `getpid()`). Another user's need the same ptrace access as its
    /// `/proc/PID/exe`.
    package static func namespaces(of pid: pid_t) -> Namespaces? {
        guard let user = identity(of: pid, "ns/user"), let mount = identity(of: pid, "ns/mnt") else { return nil }
        return Namespaces(user: user, mount: mount)
    }

    /// Device and inode of what `/proc/PID/NAME` leads to. The
    /// corresponding C function is `stat`.
    private static func identity(of pid: pid_t, _ name: StaticString) -> FileIdentity? {
        var st = stat()
        guard withProcPath(pid, name, { stat($0, &st) }) == 0 else { return nil }
        return FileIdentity(st)
    }

    /// A pidfd of the process thread `tid` belongs to, and that process's id.
    ///
    /// `pidfd_open` of a thread that is not its process's main thread fails
    /// (EINVAL, or ENOENT on newer kernels); only then is
    /// `/proc/TID/status` read.
    private static func openProcess(ofThread tid: pid_t) -> (pidfd: Int32, pid: pid_t)? {
        let direct = cprocess_pidfd_open(tid)
        if direct >= 0 { return (direct, tid) }
        guard errno == EINVAL || errno == ENOENT, let pid = threadGroup(of: tid) else { return nil }
        let pidfd = cprocess_pidfd_open(pid)
        return pidfd >= 0 ? (pidfd, pid) : nil
    }

    /// The `Tgid:` (process id) of thread `tid`, from `/proc/TID/status`.
    private static func threadGroup(of tid: pid_t) -> pid_t? {
        withUnsafeTemporaryAllocation(byteCount: statusPrefixLength, alignment: 1) { buffer -> pid_t? in
            guard let n = readFile(tid, "status", into: buffer) else { return nil }
            let text = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            guard let start = firstRange(of: tgidKey, in: text)?.upperBound else { return nil }
            var value: Int32 = 0
            var index = start
            while index < text.count, text[index] >= UInt8(ascii: "0"), text[index] <= UInt8(ascii: "9") {
                let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
                guard !overflow else { return nil }
                let (sum, carry) = shifted.addingReportingOverflow(Int32(text[index] - UInt8(ascii: "0")))
                guard !carry else { return nil }
                value = sum
                index += 1
            }
            return index > start && value > 0 ? value : nil
        }
    }

    /// `/proc/PID/exe` read into `buffer`: the path the process was started
    /// from, ending in " (deleted)" when that file has since been removed.
    /// The corresponding C function is `readlink`.
    private static func readExecutable(of pid: pid_t, into buffer: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self) else { return nil }
        let n = withProcPath(pid, "exe") { path in readlink(path, base, buffer.count) }
        guard n > 0, n < buffer.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: buffer[0..<n])
    }

    /// The path of the `0::PATH` line of `/proc/PID/cgroup` (the unified,
    /// cgroup v2 hierarchy, present on pure v2 and on hybrid systems).
    private static func readCgroup(of pid: pid_t, into buffer: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let n = readFile(pid, "cgroup", into: buffer), n < buffer.count else { return nil }
        let text = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
        var lineStart = 0
        while lineStart < text.count {
            let lineEnd = text[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let line = UnsafeRawBufferPointer(rebasing: text[lineStart..<lineEnd])
            if line.count >= 3, line[0] == UInt8(ascii: "0"), line[1] == UInt8(ascii: ":"), line[2] == UInt8(ascii: ":") {
                return UnsafeRawBufferPointer(rebasing: line[3...])
            }
            lineStart = lineEnd + 1
        }
        return nil
    }

    /// Reads `/proc/PID/NAME` into `buffer` up to its end or the buffer's.
    ///
    /// - Returns: the bytes read, or nil when it cannot be opened or read.
    private static func readFile(_ pid: pid_t, _ name: StaticString, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let fd = withProcPath(pid, name) { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        // Raw, closed here, like the pidfd: nothing allocated per check.
        defer { close(fd) }
        var total = 0
        while total < buffer.count {
            let n = SystemCall.retryingInterrupts { Glibc.read(fd, buffer.baseAddress.map { $0 + total }, buffer.count - total) }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            total += n
        }
        return total
    }

    /// Calls `body` with "/proc/PID/NAME" as a C string built on the stack.
    private static func withProcPath<R>(_ pid: pid_t, _ name: StaticString, _ body: (UnsafePointer<CChar>) -> R) -> R {
        // "/proc/" + at most 10 digits + "/" + a short name + NUL.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { path in
            guard let base = path.baseAddress, name.utf8CodeUnitCount <= 14 else {
                preconditionFailure("internal error: /proc path buffer too small")
            }
            let prefix: StaticString = "/proc/"
            var length = 0
            prefix.withUTF8Buffer { for byte in $0 { path[length] = byte; length += 1 } }
            var value = UInt32(bitPattern: pid)
            var digits = 1
            while value >= 10 { value /= 10; digits += 1 }
            value = UInt32(bitPattern: pid)
            for i in stride(from: length + digits - 1, through: length, by: -1) {
                path[i] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
            length += digits
            path[length] = UInt8(ascii: "/")
            length += 1
            name.withUTF8Buffer { for byte in $0 { path[length] = byte; length += 1 } }
            path[length] = 0
            return base.withMemoryRebound(to: CChar.self, capacity: length + 1) { body($0) }
        }
    }

    /// The first occurrence of `needle` in `haystack`.
    private static func firstRange(of needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Range<Int>? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start..<(start + needle.count) }
        }
        return nil
    }
}
