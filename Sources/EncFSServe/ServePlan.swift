import EncFSCLI
import EncFSCore
import EncFSService
#if canImport(Glibc)
import Glibc
#endif

/// What encfs-serve was asked to do, checked before anything is opened:
/// every refusal here is a usage error (exit 2).
struct ServePlan {
    /// The bundle's path or address.
    let bundle: [UInt8]
    /// `--listen` values (the default when none); ignored when systemd
    /// passes sockets.
    let addresses: [ListenAddress]
    let acceptsAnyHost: Bool
    let socketMode: mode_t
    let urlFile: [UInt8]?
    let json: Bool
    /// `--token-file`, nil for a random token.
    let tokenFile: [UInt8]?
    let requiresToken: Bool
    var settings = ServeSettings()
    var limits = ServeLimits()
    let rules: AccessRules
    let logFile: [UInt8]?
    /// `--protection`, `--idle-lock`, `--start-locked`, as for a mount.
    let lock: LockSettings
    /// `--name`: the control socket's name (`encfs-ctl --name NAME`); nil
    /// without a control socket.
    let name: [UInt8]?

    init(_ args: ArgumentParser.Result) throws {
        let address = try RemoteCommandLine.address(from: args)
        switch (args.positionals.count, address) {
        case (1, nil): bundle = args.positionals[0]
        case (0, let address?): bundle = address
        case (0, nil): throw UsageError("missing BUNDLE or URL")
        default: throw UsageError("too many arguments: give one BUNDLE or URL")
        }
        do {
            let given = try args.values("--listen").map { (text) throws(ListenAddress.Invalid) in try ListenAddress.parse(text) }
            addresses = given.isEmpty ? [.ipv4(address: UInt32(0x7f00_0001).bigEndian, port: 0, urlHost: "127.0.0.1")] : given
        } catch {
            throw UsageError("--listen: \(error.reason)")
        }
        acceptsAnyHost = args.has("--listen-any")
        if !acceptsAnyHost, let open = addresses.first(where: { !$0.isLoopback }) {
            throw UsageError("--listen \(Self.describe(open)) is not a loopback address; add --listen-any to serve other machines")
        }
        // Sockets systemd passes replace --listen; what they are is checked
        // when they are taken (ServeServer.open).
        let passedBySystemd = getenv("LISTEN_PID").map { pid_t(String(cString: $0)) == getpid() } ?? false
        let listensOnUnixOnly = passedBySystemd || addresses.allSatisfy(\.isUnix)
        requiresToken = !args.has("--no-token")
        tokenFile = args.value("--token-file")
        if !requiresToken {
            guard tokenFile == nil else { throw UsageError("--no-token and --token-file exclude each other") }
            guard !acceptsAnyHost, listensOnUnixOnly else {
                throw UsageError("--no-token needs every --listen to be a unix socket (unix:PATH)")
            }
        }
        if let text = args.value("--socket-mode") {
            guard let mode = mode_t(String(decoding: text, as: UTF8.self), radix: 8), mode <= 0o777 else {
                throw UsageError("--socket-mode must be an octal mode such as 600 or 660")
            }
            socketMode = mode
        } else {
            socketMode = 0o600
        }
        urlFile = args.value("--url-file")
        json = args.has("--json")
        logFile = args.value("--log-file")
        if args.has("--no-index") {
            guard !args.has("--index") else { throw UsageError("--index and --no-index exclude each other") }
            settings.index = nil
        } else if let name = args.value("--index") {
            guard !name.isEmpty, !name.contains(UInt8(ascii: "/")), !name.contains(0) else {
                throw UsageError("--index must be a file name, such as index.html")
            }
            settings.index = name
        }
        settings.listsDirectories = args.has("--list-directories")
        if let value = args.value("--cache-control") {
            guard !value.isEmpty, !value.contains(where: { $0 < 0x20 || $0 == 0x7f }) else {
                throw UsageError("--cache-control must be a header value on one line")
            }
            settings.cacheControl = String(decoding: value, as: UTF8.self)
        }
        limits = try Self.limits(from: args)
        (lock, name) = try Self.lockPlan(args, remote: address != nil)
        rules = try AccessOptions.rules(from: args)
        if rules.restrictsCallers, !listensOnUnixOnly {
            throw UsageError("--allow-uid, --allow-gid, --allow-exe and --allow-cgroup need every --listen to be a unix socket: the peer of a TCP connection cannot be identified")
        }
    }

    /// `--max-connections`, `--timeout`, `--max-request-rate`,
    /// `--header-timeout`.
    private static func limits(from args: ArgumentParser.Result) throws -> ServeLimits {
        var limits = ServeLimits()
        if let text = args.value("--max-connections") {
            guard let n = UInt32(String(decoding: text, as: UTF8.self)), n > 0, n <= 65536 else {
                throw UsageError("--max-connections must be a number from 1 to 65536")
            }
            limits.connections = n
        }
        if let text = args.value("--timeout") {
            guard let n = UInt32(String(decoding: text, as: UTF8.self)), n > 0, n <= 86400 else {
                throw UsageError("--timeout must be a number of seconds from 1 to 86400")
            }
            limits.timeoutSeconds = n
        }
        if let text = args.value("--max-request-rate") {
            guard let n = Int(String(decoding: text, as: UTF8.self)), n >= 0, n <= 1_000_000 else {
                throw UsageError("--max-request-rate must be a number of requests per second from 0 (no limit) to 1000000")
            }
            limits.requestsPerSecond = n
        }
        if let text = args.value("--header-timeout") {
            guard let n = Int(String(decoding: text, as: UTF8.self)), n > 0, n <= 3600 else {
                throw UsageError("--header-timeout must be a number of seconds from 1 to 3600")
            }
            limits.headerSeconds = n
        }
        return limits
    }

    /// The lock settings and `--name`: lock options need a name, since
    /// only `encfs-ctl --name NAME unlock` can unlock.
    private static func lockPlan(_ args: ArgumentParser.Result, remote: Bool) throws -> (LockSettings, [UInt8]?) {
        var lock = try LockOptions.settings(from: args)
        let name = args.value("--name")
        if let name, !ControlSocket.isValidServerName(name) {
            throw UsageError("--name must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)")
        }
        if name == nil, lock.needsEveryOpen {
            throw UsageError("\(LockOptions.protection), \(LockOptions.idleLock) and \(LockOptions.startLocked) need --name NAME "
                             + "(encfs-ctl --name NAME unlocks the server)")
        }
        if name != nil, lock.controlDirectory == nil {
            throw UsageError("--name needs a control socket directory, and XDG_RUNTIME_DIR is not set")
        }
        if remote || RemoteCommandLine.isRemote(args.positionals.first ?? []), lock.startsLocked {
            throw UsageError("\(LockOptions.startLocked) is not supported for a remote bundle")
        }
        if name == nil { lock.controlDirectory = nil }
        return (lock, name)
    }

    static func describe(_ address: ListenAddress) -> String {
        switch address {
        case .ipv4(let ip, let port, _):
            var value = in_addr(s_addr: ip)
            var text = [CChar](repeating: 0, count: 16)
            _ = inet_ntop(AF_INET, &value, &text, 16)
            return "\(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)):\(port)"
        case .ipv6(_, let port, let host): return "\(host):\(port)"
        case .unix(let path): return "unix:\(String(decoding: path, as: UTF8.self))"
        }
    }
}
