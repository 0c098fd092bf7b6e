import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// A listening socket encfs-serve serves: bound here from a `--listen`
/// address, or handed over by systemd (`LISTEN_FDS`).
final class Listener: Sendable {
    /// The listening socket (libmicrohttpd accepts on it).
    let fd: Int32
    /// How `--json` and messages name it: `127.0.0.1:41234`, `unix:PATH`.
    let display: String
    /// The base URL without the token: `http://127.0.0.1:41234/`.
    let url: String
    let hosts: HostCheck
    let isUnix: Bool
    /// The socket file this process created (removed at exit) and its
    /// inode, so that a file put there since is left alone.
    private let created: (path: [UInt8], device: UInt64, inode: UInt64)?

    private init(fd: Int32, display: String, url: String, hosts: HostCheck, isUnix: Bool,
                 created: (path: [UInt8], device: UInt64, inode: UInt64)?) {
        self.fd = fd
        self.display = display
        self.url = url
        self.hosts = hosts
        self.isUnix = isUnix
        self.created = created
    }

    /// Backlog of connections not yet accepted.
    static let backlog: Int32 = 128

    /// Binds and listens on `address`; a unix socket gets `mode`.
    ///
    /// - Throws: `BundleError.io` naming the address.
    static func bind(_ address: ListenAddress, socketMode: mode_t, acceptsAnyHost: Bool) throws -> Listener {
        switch address {
        case .ipv4(let ip, let port, let urlHost):
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = port.bigEndian
            sa.sin_addr.s_addr = ip
            let fd = try tcpSocket(family: AF_INET, &sa, display: "\(urlHost):\(port)")
            let bound = boundPort(fd)
            return Listener(fd: fd, display: "\(urlHost):\(bound)", url: "http://\(urlHost):\(bound)/",
                            hosts: .tcp(addresses: [urlHost, "127.0.0.1"], port: bound, acceptsAny: acceptsAnyHost),
                            isUnix: false, created: nil)
        case .ipv6(let ip, let port, let urlHost):
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sa.sin6_addr) { $0.copyBytes(from: ip) }
            let fd = try tcpSocket(family: AF_INET6, &sa, display: "\(urlHost):\(port)")
            let bound = boundPort(fd)
            return Listener(fd: fd, display: "\(urlHost):\(bound)", url: "http://\(urlHost):\(bound)/",
                            hosts: .tcp(addresses: [urlHost, "[::1]"], port: bound, acceptsAny: acceptsAnyHost),
                            isUnix: false, created: nil)
        case .unix(let path):
            return try unixSocket(path, mode: socketMode)
        }
    }

    /// The sockets systemd passed (`LISTEN_PID` is this process,
    /// `LISTEN_FDS` of them from fd 3), or nil when it passed none. The
    /// variables are removed, so that nothing this process starts sees them.
    ///
    /// - Throws: `ListenAddress.Invalid` for a passed socket that is
    ///   neither a unix nor a loopback one (without `--listen-any`).
    static func fromSystemd(acceptsAnyHost: Bool) throws(ListenAddress.Invalid) -> [Listener]? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pidText = getenv("LISTEN_PID"), let pid = Int32(String(cString: pidText)), pid == getpid(),
              let countText = getenv("LISTEN_FDS"), let count = Int32(String(cString: countText)), count > 0 else { return nil }
        var listeners: [Listener] = []
        for fd in 3..<(3 + count) {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let family = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 ? Int32($0.pointee.sa_family) : -1 }
            }
            switch family {
            case AF_UNIX:
                listeners.append(Listener(fd: fd, display: "fd:\(fd) (unix)", url: "http://localhost/", hosts: .unixSocket,
                                          isUnix: true, created: nil))
            case AF_INET, AF_INET6:
                let port = boundPort(fd)
                let loopback = family == AF_INET
                    ? withUnsafeBytes(of: &storage) { $0.load(fromByteOffset: 4, as: UInt8.self) } == 127
                    : withUnsafeBytes(of: &storage) { Array($0[8..<24]) } == [UInt8](repeating: 0, count: 15) + [1]
                guard loopback || acceptsAnyHost else {
                    throw ListenAddress.Invalid("socket passed by systemd (fd \(fd)) is not a loopback address; add --listen-any")
                }
                let host = family == AF_INET ? "127.0.0.1" : "[::1]"
                listeners.append(Listener(fd: fd, display: "\(host):\(port)", url: "http://\(host):\(port)/",
                                          hosts: .tcp(addresses: [host], port: port, acceptsAny: acceptsAnyHost),
                                          isUnix: false, created: nil))
            default:
                throw ListenAddress.Invalid("fd \(fd) passed by systemd is not a stream socket encfs-serve can serve")
            }
        }
        return listeners
    }

    /// Removes the socket file this process created, if it is still the
    /// same file.
    func removeSocketFile() {
        guard let created else { return }
        var st = stat()
        guard lstat(String(decoding: created.path, as: UTF8.self), &st) == 0,
              UInt64(st.st_dev) == created.device, UInt64(st.st_ino) == created.inode else { return }
        _ = created.path.withCString { unlink($0) }
    }

    // MARK: - Binding

    private static func tcpSocket<Address>(family: Int32, _ address: inout Address, display: String) throws -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw lastIO("create socket for", Array(display.utf8)) }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 { _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
        }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let error = lastIO("listen on", Array(display.utf8))
            close(fd)
            throw error
        }
        return fd
    }

    /// The port `fd` is bound to (the free one the kernel chose for 0).
    private static func boundPort(_ fd: Int32) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        // sin_port and sin6_port both sit at offset 2, in network order.
        return withUnsafeBytes(of: &storage) { UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self)) }
    }

    /// A unix socket at `path` with `mode`: a stale socket there (nobody
    /// accepts on it) is replaced; a live one, or any other file, is an
    /// error. The mode is set by the umask at `bind`, not by a `chmod`
    /// afterwards, which would follow a symlink put there meanwhile.
    private static func unixSocket(_ path: [UInt8], mode: mode_t) throws -> Listener {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + 1)
        var st = stat()
        if path.withCString({ lstat($0, &st) }) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw BundleError.io(errno: EEXIST, operation: "listen on (not a socket)", path: path)
            }
            let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            let live = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, length) } } == 0
            let reason = errno
            close(probe)
            guard !live else { throw BundleError.io(errno: EADDRINUSE, operation: "listen on (a server is listening)", path: path) }
            guard reason == ECONNREFUSED else { throw BundleError.io(errno: reason, operation: "check stale socket", path: path) }
            _ = path.withCString { unlink($0) }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw lastIO("create socket for", path) }
        let previous = umask(~mode & 0o777)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) } }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw BundleError.io(errno: bindError, operation: "listen on", path: path)
        }
        guard listen(fd, backlog) == 0, fstatPath(path, &st) else {
            let error = lastIO("listen on", path)
            close(fd)
            throw error
        }
        return Listener(fd: fd, display: "unix:\(String(decoding: path, as: UTF8.self))", url: "http://localhost/",
                        hosts: .unixSocket, isUnix: true, created: (path, UInt64(st.st_dev), UInt64(st.st_ino)))
    }

    private static func fstatPath(_ path: [UInt8], _ st: inout stat) -> Bool {
        path.withCString { lstat($0, &st) } == 0
    }

    /// The error of the system call that just failed.
    private static func lastIO(_ operation: String, _ path: [UInt8]) -> BundleError {
        .io(errno: errno, operation: operation, path: path)
    }
}
