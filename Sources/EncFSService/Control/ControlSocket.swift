import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Where a mount's control socket lives and how either side reaches it.
///
/// One socket per mount, named after the mountpoint so `encfs-ctl
/// MOUNTPOINT` finds it: the first 16 bytes of the SHA-256 of the
/// mountpoint's canonical path, in hex, plus `.sock`, in a directory only
/// its owner can enter (``directory(uid:runtimeDirectory:)``). The socket
/// itself is 0600, and the daemon checks every peer's credentials
/// (`SO_PEERCRED`) as well: the mounting user or root only.
package enum ControlSocket {
    /// The directory for a process of `uid`: `/run/encfs` for root, else
    /// `RUNTIME/encfs` with `runtimeDirectory` from `$XDG_RUNTIME_DIR`
    /// (the caller reads the environment); nil without one.
    package static func directory(uid: uid_t, runtimeDirectory: [UInt8]?) -> [UInt8]? {
        if uid == 0 { return Array("/run/encfs".utf8) }
        guard let runtimeDirectory, runtimeDirectory.first == UInt8(ascii: "/") else { return nil }
        return runtimeDirectory + Array("/encfs".utf8)
    }

    /// Where a client of `uid` looks for sockets, in order, and who must
    /// own each directory (nil: anyone, who is then the daemon's user):
    /// its own directory, and for root also `$XDG_RUNTIME_DIR/encfs` (a
    /// user's mounts, reached with that user's runtime directory in the
    /// environment, e.g. `sudo XDG_RUNTIME_DIR=/run/user/1000 encfs-ctl …`).
    /// A client uses the first directory where the socket exists.
    package static func directories(forClient uid: uid_t, runtimeDirectory: [UInt8]?) -> [(path: [UInt8], owner: uid_t?)] {
        var found: [(path: [UInt8], owner: uid_t?)] = []
        if let own = directory(uid: uid, runtimeDirectory: runtimeDirectory) { found.append((own, uid)) }
        if uid == 0, let runtimeDirectory, runtimeDirectory.first == UInt8(ascii: "/") {
            found.append((runtimeDirectory + Array("/encfs".utf8), nil))
        }
        return found
    }

    /// The socket of the mount at `mountpoint` (canonical, absolute) in
    /// `directory`.
    package static func path(forMountpoint mountpoint: [UInt8], in directory: [UInt8]) -> [UInt8] {
        let digest = mountpoint.withUnsafeBytes { SHA256.hash($0) }
        return directory + Array("/\(Hex.encode(Array(digest.prefix(16)))).sock".utf8)
    }

    /// The control socket of the encfs-serve started with `--name name`
    /// in `directory`: `serve-NAME.sock`, readable in a listing (a
    /// mount's are 32 hex digits, so the two never meet).
    package static func path(forServer name: [UInt8], in directory: [UInt8]) -> [UInt8] {
        directory + Array("/\(serverPrefix)".utf8) + name + Array(".sock".utf8)
    }

    /// What a server's socket name starts with.
    package static let serverPrefix = "serve-"

    /// Whether `name` may name a server (`--name`): 1 to 64 of
    /// `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, so that it is
    /// one file name, never a path, and fits a socket address.
    package static func isValidServerName(_ name: [UInt8]) -> Bool {
        guard let first = name.first, name.count <= 64, first != UInt8(ascii: "."), first != UInt8(ascii: "-") else { return false }
        return name.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// Creates `directory` 0700 if missing, and refuses one that another
    /// user owns or others may enter (someone could swap the socket).
    ///
    /// - Throws: `BundleError.io` naming the directory.
    package static func prepareDirectory(_ directory: [UInt8]) throws {
        if directory.withCString({ mkdir($0, 0o700) }) != 0, errno != EEXIST {
            throw BundleError.io(errno: errno, operation: "create control socket directory", path: directory)
        }
        _ = try checkDirectory(directory, owner: getuid())
    }

    /// Refuses `directory` unless it is a directory (not a symlink to one)
    /// that only its owner may enter, owned by `owner` when given: the
    /// daemon's check, and `encfs-ctl`'s before it sends anything.
    ///
    /// - Returns: its owner.
    /// - Throws: `BundleError.io` naming the directory (EPERM when it
    ///   fails the check).
    package static func checkDirectory(_ directory: [UInt8], owner: uid_t?) throws -> uid_t {
        var st = stat()
        guard directory.withCString({ lstat($0, &st) }) == 0 else {
            throw BundleError.io(errno: errno, operation: "check control socket directory", path: directory)
        }
        guard st.st_mode & S_IFMT == S_IFDIR, owner.map({ st.st_uid == $0 }) ?? true, st.st_mode & 0o077 == 0 else {
            let whose = owner.map { $0 == getuid() ? "this user" : ($0 == 0 ? "root" : "uid \($0)") } ?? "its owner"
            throw BundleError.io(errno: EPERM, operation: "use control socket directory (it must be a 0700 directory of \(whose))",
                                 path: directory)
        }
        return st.st_uid
    }

    /// The socket address of `path`.
    ///
    /// - Throws: `BundleError.io` (ENAMETOOLONG) when it does not fit.
    package static func address(_ path: [UInt8]) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { throw BundleError.io(errno: ENAMETOOLONG, operation: "name control socket", path: path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        return address
    }

    /// A new close-on-exec stream socket.
    package static func makeSocket() throws -> FileDescriptor {
        let fd = try SystemCall.retrying("create control socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        return FileDescriptor(taking: fd)
    }

    /// Binds and listens at `path` (0600). A socket left there by a daemon
    /// that was killed (nothing accepts on it) is replaced; one that
    /// answers belongs to a live mount and is an error.
    ///
    /// - Throws: `BundleError.io` naming the path.
    package static func listen(at path: [UInt8]) throws -> FileDescriptor {
        var address = try address(path)
        let socket = try makeSocket()
        // 0600 from the start: no moment where others could connect.
        let previousMask = umask(0o177)
        defer { umask(previousMask) }
        func bind() -> Int32 {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
        if bind() != 0 {
            guard errno == EADDRINUSE else { throw BundleError.io(errno: errno, operation: "bind control socket", path: path) }
            guard (try? connect(to: path)) == nil else {
                throw BundleError.io(errno: EADDRINUSE, operation: "bind control socket (another mount answers on it)", path: path)
            }
            _ = path.withCString { unlink($0) }
            guard bind() == 0 else { throw BundleError.io(errno: errno, operation: "bind control socket", path: path) }
        }
        _ = try SystemCall.retrying("listen on control socket", path: path) { Glibc.listen(socket.rawValue, 8) }
        return socket
    }

    /// A connection to the socket at `path`, with the protocol's timeouts.
    ///
    /// - Throws: `BundleError.io` (ENOENT: no such mount; ECONNREFUSED: its
    ///   daemon is gone; EACCES: not ours).
    package static func connect(to path: [UInt8]) throws -> FileDescriptor {
        var address = try address(path)
        let socket = try makeSocket()
        _ = try SystemCall.retrying("connect to control socket", path: path) {
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        }
        setTimeouts(socket)
        return socket
    }

    /// Bounds every read and write on `socket` by
    /// ``ControlProtocol/timeoutSeconds``.
    package static func setTimeouts(_ socket: FileDescriptor) {
        var timeout = timeval(tv_sec: ControlProtocol.timeoutSeconds, tv_usec: 0)
        _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The process at the other end of `socket`, as the kernel recorded
    /// it at connect or listen (`SO_PEERCRED`); nil when unknown.
    package static func peerCredentials(of socket: FileDescriptor) -> (pid: pid_t, uid: uid_t, gid: gid_t)? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: Glibc declares
        // it only under _GNU_SOURCE, which Swift's Glibc module is not
        // built with; the layout is the kernel's ABI.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, uid_t.max, gid_t.max)
        var length = socklen_t(MemoryLayout<(pid_t, uid_t, gid_t)>.size)
        guard getsockopt(socket.rawValue, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              length == socklen_t(MemoryLayout<(pid_t, uid_t, gid_t)>.size) else { return nil }
        return credentials
    }

    /// Whether the client at the other end of `socket` has closed it
    /// (POLLHUP: a Unix stream socket reports it once the peer is gone,
    /// not when it only shut down its writing side). The corresponding C
    /// function is `poll`.
    package static func peerHasGone(_ socket: FileDescriptor) -> Bool {
        var state = pollfd(fd: socket.rawValue, events: 0, revents: 0)
        guard SystemCall.retryingInterrupts({ poll(&state, 1, 0) }) >= 0 else { return false }
        return state.revents & Int16(POLLHUP | POLLERR) != 0
    }
}
