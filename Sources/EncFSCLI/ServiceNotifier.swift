import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol (`sd_notify`): `KEY=VALUE` lines in one
/// datagram to the Unix socket named by `NOTIFY_SOCKET`, so that a
/// `Type=notify` unit running `encfs-mount -f` counts as started only once
/// the mount serves, and sees it stopping.
///
/// A name starting with `@` is in the abstract namespace (the `@` stands
/// for a leading NUL byte). Failures are ignored, as sd_notify's callers do:
/// readiness is a courtesy to the service manager, never a reason to stop
/// serving.
package struct ServiceNotifier {
    /// The environment variable systemd sets for `Type=notify` services.
    package static let socketVariable = "NOTIFY_SOCKET"

    private let address: [UInt8]

    /// The notifier for `$NOTIFY_SOCKET`, or nil when it is unset or
    /// unusable (empty, longer than a socket path, neither absolute nor
    /// abstract). The variable is removed so that programs this process
    /// starts (fusermount3) do not talk to the service manager in its name.
    package static func fromEnvironment() -> ServiceNotifier? {
        guard let value = getenv(socketVariable) else { return nil }
        let name = Array(UnsafeRawBufferPointer(start: value, count: strlen(value)))
        unsetenv(socketVariable)
        return ServiceNotifier(socketName: name)
    }

    /// - Parameter socketName: an absolute path or `@name`.
    package init?(socketName: [UInt8]) {
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard let first = socketName.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@"),
              socketName.count < capacity else { return nil }
        address = first == UInt8(ascii: "@") ? [0] + socketName.dropFirst() : socketName
    }

    /// Sends `fields` (`READY=1`, `STATUS=…`) as one datagram, newline-separated.
    ///
    /// - Returns: whether the datagram was sent.
    @discardableResult
    package func send(_ fields: [String]) -> Bool {
        let message = Array(fields.joined(separator: "\n").utf8)
        guard let socket = try? SystemCall.retrying("create socket", {
            Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }) else { return false }
        let owned = FileDescriptor(taking: socket)
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
            path.copyBytes(from: address)
        }
        // A path counts its terminating NUL; an abstract name does not.
        let pathLength = address.first == 0 ? address.count : address.count + 1
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathLength)
        let sent = message.withUnsafeBytes { bytes in
            withUnsafePointer(to: &socketAddress) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(owned.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
        return sent == message.count
    }

    /// `STATUS=` text naming a path (escaped: a name cannot add a line).
    package static func status(_ text: String, path: [UInt8]) -> String {
        "STATUS=\(text) \(PrintableText.escaping(path))"
    }
}
