import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Clears a control-socket directory of the sockets that daemons killed
/// without an unmount left behind (SIGKILL, a crash, a power cut of a
/// persistent directory): nothing answers on them, `encfs-ctl` only says
/// so, and one is named after each mountpoint ever used, so the directory
/// would otherwise grow for ever.
///
/// What counts as stale, and only that is removed: an entry named as the
/// daemon names sockets (32 hex digits and `.sock`), that is a socket
/// itself (looked at with `lstat`, never through a symlink), owned by
/// this user, on which `connect` is refused (ECONNREFUSED: no process
/// listens). A socket that answers, is busy or cannot be reached for any
/// other reason is left alone. The sweep and every bind-to-listen in the
/// directory run under the directory's `flock`, so a socket another
/// daemon has bound but not yet listens on is never taken for stale.
package enum StaleControlSockets {
    /// Runs `body` holding the exclusive `flock` of `directory` (an open
    /// descriptor of it, released when `body` returns).
    ///
    /// - Throws: `BundleError.io` naming the directory, or what `body` throws.
    package static func withLock<T>(on directory: [UInt8], _ body: () throws -> T) throws -> T {
        let handle = try FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                                             operation: "open control socket directory")
        _ = try SystemCall.retrying("lock control socket directory", path: directory) { flock(handle.rawValue, LOCK_EX) }
        return try body()
    }

    /// Removes the stale sockets in `directory` (see the type's summary).
    /// Call it under ``withLock(on:_:)``.
    ///
    /// - Returns: how many were removed.
    @discardableResult
    package static func sweep(_ directory: [UInt8]) -> Int {
        guard let stream = directory.withCString({ opendir($0) }) else { return 0 }
        defer { closedir(stream) }
        let directoryFD = dirfd(stream)
        var removed = 0
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            guard isSocketName(name) else { continue }
            var st = stat()
            guard name.withCString({ fstatat(directoryFD, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0,
                  st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == getuid() else { continue }
            guard nobodyListens(at: directory + [UInt8(ascii: "/")] + name) else { continue }
            if name.withCString({ unlinkat(directoryFD, $0, 0) }) == 0 { removed += 1 }
        }
        return removed
    }

    /// Whether `name` is one ``ControlSocket/path(forMountpoint:in:)``
    /// makes: 32 lowercase hex digits and `.sock`.
    package static func isSocketName(_ name: [UInt8]) -> Bool {
        let suffix = Array(".sock".utf8)
        guard name.count == 32 + suffix.count, name.suffix(suffix.count).elementsEqual(suffix) else { return false }
        return name.prefix(32).allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// Whether connecting to `path` is refused (ECONNREFUSED). The
    /// connect does not block: a live daemon whose queue is full answers
    /// EAGAIN, and counts as live. The corresponding C function is
    /// `connect`.
    private static func nobodyListens(at path: [UInt8]) -> Bool {
        guard var address = try? ControlSocket.address(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        let probe = FileDescriptor(taking: fd)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return rc != 0 && errno == ECONNREFUSED
    }
}
