/// Which `Host` headers a listener accepts: the DNS-rebinding defence. A
/// page of another origin that points its own name at 127.0.0.1 still
/// sends that name, and is answered 421.
struct HostCheck: Sendable {
    /// Accepted values, lower case (`127.0.0.1:41234`, `localhost:41234`…).
    let names: [[UInt8]]
    /// `--listen-any`: every host is accepted (the token is then the guard).
    let acceptsAny: Bool

    /// The names for a TCP listener on `port`: its address, `localhost`,
    /// each with the port (and without it for port 80).
    static func tcp(addresses: [String], port: UInt16, acceptsAny: Bool) -> HostCheck {
        var names: [[UInt8]] = []
        for host in addresses + ["localhost"] {
            names.append(Array("\(host):\(port)".utf8))
            if port == 80 { names.append(Array(host.utf8)) }
        }
        return HostCheck(names: names, acceptsAny: acceptsAny)
    }

    /// A unix socket: `localhost`, with or without a port (curl
    /// `--unix-socket http://localhost/…` and a forwarding protocol handler
    /// both send that).
    static let unixSocket = HostCheck(names: [Array("localhost".utf8)], acceptsAny: false)

    /// Whether `host` (the header's value, nil when absent) is accepted.
    func admits(_ host: [UInt8]?) -> Bool {
        if acceptsAny { return true }
        guard var host else { return false }
        host = host.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        if names.contains(host) { return true }
        // A unix socket's name carries no port: accept `localhost:ANY`.
        if self.names == Self.unixSocket.names, host.starts(with: Array("localhost:".utf8)) { return true }
        return false
    }
}
