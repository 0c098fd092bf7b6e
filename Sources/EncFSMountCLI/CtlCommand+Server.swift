import EncFSCore
import EncFSService
#if canImport(Glibc)
import Glibc
import EncFSCLI
#endif

extension CtlCommand {
    /// What the command line addresses: a mount by its mountpoint, or an
    /// encfs-serve by `--name NAME` or by its control socket's path.
    enum Target {
        /// The mountpoint's canonical path (which names its socket).
        case mount(canonical: [UInt8])
        /// A server's name; `directory` when the socket's path was given
        /// (then only that control directory is tried).
        case server(name: [UInt8], directory: [UInt8]?)

        /// `--name NAME`, else the first positional: a socket is a
        /// server's control socket, anything else a mountpoint.
        ///
        /// - Throws: `CommandError` for a path that does not resolve or a
        ///   socket that is not a server's in a control directory.
        init(_ args: ArgumentParser.Result) throws {
            if let name = args.value("--name") {
                self = .server(name: name, directory: nil)
                return
            }
            let given = args.positionals[0]
            var st = stat()
            if given.withCString({ lstat($0, &st) }) == 0, st.st_mode & S_IFMT == S_IFSOCK {
                self = try Self.serverSocket(given)
                return
            }
            do { self = .mount(canonical: try LocalFiles.resolvedPath(given)) } catch {
                throw CommandError("cannot resolve path", path: given)
            }
        }

        /// The server whose control socket is at `path`: its directory
        /// must be one this user's control sockets go in
        /// (``ControlSocket/directories(forClient:runtimeDirectory:)``) and
        /// its name `serve-NAME.sock`, so that a socket anywhere else (one a
        /// local user planted) is never sent a request, let alone a key.
        private static func serverSocket(_ path: [UInt8]) throws -> Target {
            let slash = path.lastIndex(of: UInt8(ascii: "/"))
            let file = Array(path[(slash.map { $0 + 1 } ?? 0)...])
            let prefix = Array(ControlSocket.serverPrefix.utf8)
            let suffix = Array(".sock".utf8)
            let name = file.count > prefix.count + suffix.count && file.starts(with: prefix) && file.suffix(suffix.count).elementsEqual(suffix)
                ? Array(file.dropFirst(prefix.count).dropLast(suffix.count)) : []
            let parent = slash.map { $0 == 0 ? [UInt8(ascii: "/")] : Array(path[..<$0]) } ?? [UInt8(ascii: ".")]
            guard ControlSocket.isValidServerName(name), let canonicalParent = try? LocalFiles.resolvedPath(parent) else {
                throw CommandError("not a server's control socket (serve-NAME.sock in a control socket directory)", path: path)
            }
            for (directory, _) in ControlSocket.directories(forClient: getuid(), runtimeDirectory: LockOptions.runtimeDirectory())
            where (try? LocalFiles.resolvedPath(directory)) == canonicalParent {
                return .server(name: name, directory: directory)
            }
            throw CommandError("not in a control socket directory (/run/encfs for root, $XDG_RUNTIME_DIR/encfs otherwise)",
                               path: path)
        }

        /// How JSON output names the target, as `status --json` does: a
        /// mount by its path, a server by its name.
        var jsonLabel: (key: String, value: [UInt8]) {
            switch self {
            case .mount(let canonical): return ("mountpoint", canonical)
            case .server(let name, _): return ("name", name)
            }
        }

        /// How messages name it.
        var shown: [UInt8] {
            switch self {
            case .mount(let canonical): return canonical
            case .server(let name, _): return Array("server \(String(decoding: name, as: UTF8.self))".utf8)
            }
        }

        var kind: String {
            if case .server = self { return "server" }
            return "mount's daemon"
        }
    }

    /// A connection to the encfs-serve named `name`, by the checks of
    /// ``connectToDaemon(of:)``: the first control directory (or only
    /// `onlyIn`) where its socket exists, which must be a 0700 directory of
    /// root or of this user, and whose owner must be the process
    /// listening (`SO_PEERCRED`). Nothing more is needed for root reaching
    /// a user's server: the name is only looked up in a directory that
    /// user owns, and only that user listens there.
    ///
    /// - Throws: `CommandError` saying which check failed, or that no
    ///   server answers.
    static func connectToServer(named name: [UInt8], in onlyIn: [UInt8]?) throws -> FileDescriptor {
        let shown = Array("server \(String(decoding: name, as: UTF8.self))".utf8)
        for (directory, owner) in ControlSocket.directories(forClient: getuid(), runtimeDirectory: LockOptions.runtimeDirectory())
        where onlyIn == nil || onlyIn == directory {
            let path = ControlSocket.path(forServer: name, in: directory)
            var st = stat()
            guard path.withCString({ lstat($0, &st) }) == 0 else { continue }
            let socket = try checkedConnect(to: path, in: directory, owner: owner, shown: shown)
            return socket.socket
        }
        throw CommandError(.noControlSocket, "no encfs-serve runs with this --name", path: shown)
    }

    /// A server's status (`kind=server`) for people.
    static func serverStatusText(_ fields: [String: String]) -> String {
        typealias Field = ControlProtocol.StatusField
        let idleLock = Int(fields[Field.idleLock] ?? "0") ?? 0
        return [
            "server:          \(fields[Field.name] ?? "?")",
            "state:           \(fields[Field.state] ?? "unknown")",
            "protection:      \(fields[Field.protection] ?? "unknown")",
            "idle lock:       \(idleLock > 0 ? "after \(idleLock) s" : "off")",
            "idle for:        \(fields[Field.idleSeconds] ?? "?") s",
            "requests served: \(fields[Field.requestsServed] ?? "?")",
        ].joined(separator: "\n") + listens(fields).map { "\nlisten:          \($0)" }.joined()
    }

    /// A server's status as one JSON object (docs/CLI.md).
    static func serverStatusJSON(_ fields: [String: String]) -> JSONValue {
        typealias Field = ControlProtocol.StatusField
        let idleLock = Int64(fields[Field.idleLock] ?? "0") ?? 0
        func number(_ name: String) -> JSONValue { Int64(fields[name] ?? "").map { .integer($0) } ?? .null }
        return .object([
            ("name", .string(fields[Field.name] ?? "")),
            ("state", .string(fields[Field.state] ?? "unknown")),
            ("locked", .bool(fields[Field.state] == "locked")),
            ("protection", .string(fields[Field.protection] ?? "unknown")),
            ("idle_lock_seconds", idleLock > 0 ? .integer(idleLock) : .null),
            ("idle_seconds", number(Field.idleSeconds)),
            ("requests_served", number(Field.requestsServed)),
            ("listen", .array(listens(fields).map { .string($0) })),
        ])
    }

    private static func listens(_ fields: [String: String]) -> [String] {
        (0..<min(Int(fields[ControlProtocol.StatusField.listenCount] ?? "") ?? 0, 64)).compactMap {
            fields[ControlProtocol.StatusField.listen($0)]
        }
    }
}
