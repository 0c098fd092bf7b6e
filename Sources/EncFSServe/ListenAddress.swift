#if canImport(Glibc)
import Glibc
#endif

/// A `--listen` value: `127.0.0.1:PORT`, `[::1]:PORT`, `localhost:PORT`,
/// `unix:PATH`, or (with `--listen-any`) another IP address and port.
/// Host names other than `localhost` are refused: resolving one could
/// bind wherever DNS says.
package enum ListenAddress: Equatable, Sendable {
    /// An IPv4 address (network byte order in `address`), a port (0: any
    /// free one), and the host as URLs name it.
    case ipv4(address: UInt32, port: UInt16, urlHost: String)
    /// An IPv6 address (16 bytes), a port, and the host as URLs name it
    /// (`[::1]`).
    case ipv6(address: [UInt8], port: UInt16, urlHost: String)
    /// A unix socket at this path.
    case unix(path: [UInt8])

    /// Parses `text`.
    ///
    /// - Throws: `ListenAddress.Invalid` with the reason.
    package static func parse(_ text: [UInt8]) throws(Invalid) -> ListenAddress {
        let string = String(decoding: text, as: UTF8.self)
        if string.hasPrefix("unix:") {
            let path = Array(text.dropFirst(5))
            guard !path.isEmpty, !path.contains(0) else { throw Invalid("unix: needs a path, such as unix:/run/app/serve.sock") }
            // sockaddr_un holds 108 bytes with the final NUL.
            guard path.count < 108 else { throw Invalid("unix socket path longer than 107 bytes") }
            return .unix(path: path)
        }
        guard let colon = string.lastIndex(of: ":") else { throw Invalid("needs HOST:PORT or unix:PATH") }
        let host = String(string[..<colon])
        guard let port = UInt16(string[string.index(after: colon)...]) else { throw Invalid("port must be a number from 0 to 65535") }
        if host.hasPrefix("["), host.hasSuffix("]") {
            var address = [UInt8](repeating: 0, count: 16)
            let literal = String(host.dropFirst().dropLast())
            guard inet_pton(AF_INET6, literal, &address) == 1 else { throw Invalid("not an IPv6 address: \(literal)") }
            return .ipv6(address: address, port: port, urlHost: host)
        }
        if host == "localhost" { return .ipv4(address: UInt32(0x7f00_0001).bigEndian, port: port, urlHost: "localhost") }
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else {
            throw Invalid("not an IP address, localhost or unix:PATH: \(host) (host names are not resolved)")
        }
        return .ipv4(address: address.s_addr, port: port, urlHost: host)
    }

    /// Whether only this machine can reach it: 127.0.0.0/8, ::1, or a
    /// unix socket.
    package var isLoopback: Bool {
        switch self {
        case .ipv4(let address, _, _): UInt32(bigEndian: address) >> 24 == 127
        case .ipv6(let address, _, _): address == [UInt8](repeating: 0, count: 15) + [1]
        case .unix: true
        }
    }

    /// Whether this is a unix socket.
    package var isUnix: Bool {
        if case .unix = self { return true }
        return false
    }

    /// Why a `--listen` value was refused.
    package struct Invalid: Error, Sendable {
        package let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
