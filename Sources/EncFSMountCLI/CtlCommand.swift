import EncFSCore
import EncFSMount
import CryptCore
#if canImport(Glibc)
import Glibc
import EncFSService
import EncFSCLI
#endif

/// `encfs-ctl MOUNTPOINT|--name NAME|SOCKET status|access-log|lock|unlock`:
/// talks to a mount's daemon or an encfs-serve over its control socket
/// (`ControlProtocol`).
package enum CtlCommand {
    static let help = """
    usage: encfs-ctl MOUNTPOINT status [--json]
           encfs-ctl MOUNTPOINT access-log [--json]
           encfs-ctl MOUNTPOINT lock [--force]
           encfs-ctl MOUNTPOINT unlock [key options]
           encfs-ctl --name NAME status|lock|unlock …
           encfs-ctl SOCKET status|lock|unlock …

    Controls a mount made by encfs-mount, or an encfs-serve started with
    --name NAME, through its control socket (/run/encfs for root,
    $XDG_RUNTIME_DIR/encfs otherwise; only the user who started it, or
    root, may connect). A server is named by --name NAME or by its control
    socket's path (that directory's serve-NAME.sock).

    commands:
      status                   locked or unlocked, protection class, open
                               handles, idle lock, transport (uring or
                               classic) and requests served by the rings;
                               --json prints one object; a remote
                               mount also each source's state, bytes and
                               errors; for a server: locked or unlocked,
                               protection, idle lock, requests served and
                               listen addresses
      access-log               the files of a remote mount read since it
                               was mounted, with the chunks read of each;
                               --json gives what encfs-mount
                               --prefetch-list takes
      lock                     wipes every key and decrypted byte the daemon
                               holds and makes the kernel drop its cached
                               pages and names; prints the handles still
                               open. Under --protection until-unmount it
                               needs --force
      unlock                   opens the bundle again with the key options;
                               a wrong key leaves the mount locked; every
                               secret of a failed unlock counts, and after
                               five in a minute attempts are refused until
                               the minute has passed (at most five secrets
                               per unlock)

    key options (for unlock; as encfs-mount, the key travels to the daemon
    over the socket, never in argv or its environment):
      --key-file FILE          a raw 256-bit key: 64 hex characters
      --passphrase-file FILE   a passphrase (one trailing newline is ignored)
      --identity FILE          a private key (PEM) for recipient slots
    \(KeyOptions.custodyHelp)
      environment: ENCFS_KEY, ENCFS_PASSPHRASE, ENCFS_IDENTITY; with none
      and a terminal, a passphrase is asked for without echo

    options:
      --name NAME              the encfs-serve started with --name NAME
      --json                   status or access-log as one JSON object
      --force                  lock even under --protection until-unmount
      -h, --help               this text
      --version                print the version and exit
      --                       end of options

    exit codes: 0 done, 1 runtime failure (no mount, refused, wrong key,
    rate-limited), 2 usage error
    """

    static let parser = ArgumentParser(options: KeyOptions.parserOptions + [
        .init(["--json"], takesValue: false),
        .init(["--force"], takesValue: false),
        .init(["--name"], takesValue: true),
        .init(["--help", "-h"], takesValue: false),
        VersionOption.option,
    ])

    /// What the command line asks for.
    private enum Action: String {
        case status, lock, unlock
        case accessLog = "access-log"
    }

    /// Runs the command and returns its exit code.
    package static func run(_ arguments: [[UInt8]]) -> Int32 {
        let diagnostics = Diagnostics(tool: "encfs-ctl")
        let args: ArgumentParser.Result
        let action: Action
        do {
            args = try parser.parse(arguments)
            if args.has("--help") {
                print(help)
                return ExitCode.success
            }
            if VersionOption.handle(args, tool: "encfs-ctl") { return ExitCode.success }
            let wanted = args.has("--name") ? 1 : 2
            guard args.positionals.count == wanted else {
                throw UsageError(args.positionals.count < wanted ? "missing MOUNTPOINT, --name NAME or command" : "too many arguments")
            }
            if let name = args.value("--name"), !ControlSocket.isValidServerName(name) {
                throw UsageError("--name must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)")
            }
            guard let parsed = Action(rawValue: String(decoding: args.positionals[wanted - 1], as: UTF8.self)) else {
                throw UsageError("unknown command (use status, access-log, lock or unlock)")
            }
            action = parsed
        } catch {
            diagnostics.report(error)
            diagnostics.hint("see encfs-ctl --help")
            return ExitCode.usage
        }
        let target = try? Target(args)
        let mountpoint = target?.shown ?? args.positionals[0]
        do {
            let request: SecureBytes
            switch action {
            case .status: request = SecureBytes(copying: [ControlProtocol.Request.status.rawValue])
            case .accessLog: request = SecureBytes(copying: [ControlProtocol.Request.accessLog.rawValue])
            case .lock:
                let code = args.has("--force") ? ControlProtocol.Request.forceLock : .lock
                request = SecureBytes(copying: [code.rawValue])
            case .unlock:
                let materials = try KeyOptions.gather(from: args, confirm: false)
                request = try ControlProtocol.unlockRequest(materials)
            }
            let resolved = try Target(args)
            // Status is quick; a lock waits for the requests in flight and
            // an unlock runs scrypt.
            let wait = action == .status || action == .accessLog ? ControlProtocol.timeoutSeconds : ControlProtocol.replyTimeoutSeconds
            let reply = try exchange(request, to: resolved, waitingSeconds: wait)
            return report(reply, for: action, json: args.has("--json"), mountpoint: resolved.shown, isServer: resolved.kind == "server",
                          jsonLabel: resolved.jsonLabel, diagnostics: diagnostics)
        } catch {
            if error is KeyInputError || error is UsageError { diagnostics.report(error) } else { diagnostics.report(error, path: mountpoint) }
            if let hint = ErrorCode.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.code(for: error)
        }
    }

    /// Sends `request` to the daemon of `canonical` (the mountpoint's
    /// canonical path, which names its socket) and returns its reply,
    /// waiting `waitingSeconds` for it at most.
    ///
    /// - Throws: `CommandError` when no daemon answers there, or not the
    ///   one it should be (``connectToDaemon(of:)``).
    private static func exchange(_ request: SecureBytes, to target: Target, waitingSeconds: Int) throws -> [UInt8] {
        let socket: FileDescriptor
        switch target {
        case .mount(let canonical): socket = try connectToDaemon(of: canonical)
        case .server(let name, let directory): socket = try connectToServer(named: name, in: directory)
        }
        do {
            try request.withUnsafeBytes { try ControlProtocol.send($0, to: socket) }
            return try ControlProtocol.receive(from: socket, within: waitingSeconds).withUnsafeBytes { Array($0) }
        } catch {
            throw CommandError("the \(target.kind) did not answer: \(String(cString: strerror((error as? BundleError)?.errno ?? EIO)))",
                               path: target.shown)
        }
    }

    /// Prints a reply, or reports a refusal.
    private static func report(_ reply: [UInt8], for action: Action, json: Bool, mountpoint: [UInt8], isServer: Bool,
                               jsonLabel: (key: String, value: [UInt8]), diagnostics: Diagnostics) -> Int32 {
        let text: String
        switch ControlProtocol.Reply(decoding: reply) {
        case .ok(let answer)?: text = answer
        case .refused(let code, let message)?:
            diagnostics.error(message)
            let shown = code.presentation()
            // The shared hint names a mountpoint; a server is named instead.
            if code == .lockNeedsForce, isServer {
                diagnostics.hint("encfs-ctl --name NAME lock --force")
            } else if let hint = shown.hint {
                diagnostics.hint(hint)
            }
            return shown.exitCode
        case nil:
            diagnostics.error("the \(isServer ? "server" : "mount's daemon") sent an empty reply", path: mountpoint)
            return ExitCode.failure
        }
        let out = OutputStream()
        switch action {
        case .status:
            let status = fields(text)
            if status[ControlProtocol.StatusField.kind] == "server" {
                if json { out.write(serverStatusJSON(status).serialized) } else { out.line(serverStatusText(status)) }
            } else if json {
                out.write(statusJSON(status, mountpoint: mountpoint).serialized)
            } else {
                out.line(statusText(status))
            }
        case .accessLog:
            let files = accessLogFiles(text)
            if json {
                out.write(JSONValue.object(JSONValue.byteString(jsonLabel.value, key: jsonLabel.key) + [
                    ("files", .array(files.map { file in
                        .object(JSONValue.byteString(file.path, key: "path") + [
                            ("chunks", .array(file.chunks.map { .array([.integer(Int64($0.first)), .integer(Int64($0.last))]) })),
                        ])
                    })),
                ]).serialized)
            } else {
                for file in files {
                    out.line(String(decoding: file.path, as: UTF8.self) + ": chunks "
                             + file.chunks.map { $0.first == $0.last ? "\($0.first)" : "\($0.first)-\($0.last)" }.joined(separator: ", "))
                }
            }
        case .lock:
            out.line(isServer ? "locked" : "locked; \(text) \(text == "1" ? "handle" : "handles") still open")
        case .unlock:
            out.line(text)
        }
        return ExitCode.success
    }

    /// The lines of an access-log reply: hex path, tab, `first-last,…`.
    private static func accessLogFiles(_ text: String) -> [(path: [UInt8], chunks: [(first: UInt64, last: UInt64)])] {
        text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 1)
            guard parts.count == 2, parts[0].utf8.count % 2 == 0 else { return nil }
            let digits = Array(parts[0].utf8)
            let path = stride(from: 0, to: digits.count, by: 2).compactMap { UInt8(String(decoding: digits[$0..<($0 + 2)], as: UTF8.self), radix: 16) }
            let chunks = parts[1].split(separator: ",").compactMap { range -> (first: UInt64, last: UInt64)? in
                let ends = range.split(separator: "-")
                guard ends.count == 2, let first = UInt64(ends[0]), let last = UInt64(ends[1]) else { return nil }
                return (first, last)
            }
            return (path, chunks)
        }
    }

    /// The `key=value` lines of a status reply.
    private static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    private static func statusText(_ fields: [String: String]) -> String {
        typealias Field = ControlProtocol.StatusField
        let idleLock = Int(fields[Field.idleLock] ?? "0") ?? 0
        return [
            "state:        \(fields[Field.state] ?? "unknown")",
            "protection:   \(fields[Field.protection] ?? "unknown")",
            "open handles: \(fields[Field.openHandles] ?? "unknown")",
            "idle lock:    \(idleLock > 0 ? "after \(idleLock) s" : "off")",
            "idle for:     \(fields[Field.idleSeconds] ?? "?") s",
            "transport:    \(fields[Field.transport] ?? "unknown") (\(fields[Field.ringRequests] ?? "0") requests on rings, "
                + "\(fields[Field.polledRequests] ?? "0") found by polling)",
        ].joined(separator: "\n") + (0..<min(Int(fields["sources"] ?? "") ?? 0, 64)).map { index in
            func field(_ name: String) -> String { fields["source.\(index).\(name)"] ?? "?" }
            return "\nsource \(index):     \(field("address")): \(field("state")), \(field("bytes")) bytes, \(field("errors")) errors"
        }.joined()
    }

    /// The status as one JSON object (docs/CLI.md; the mountpoint is the
    /// path this command resolved, as a byte string).
    private static func statusJSON(_ fields: [String: String], mountpoint: [UInt8]) -> JSONValue {
        typealias Field = ControlProtocol.StatusField
        let idleLock = Int64(fields[Field.idleLock] ?? "0") ?? 0
        func number(_ name: String) -> JSONValue { Int64(fields[name] ?? "").map { .integer($0) } ?? .null }
        return .object(JSONValue.byteString(mountpoint, key: "mountpoint") + [
            ("state", .string(fields[Field.state] ?? "unknown")),
            ("locked", .bool(fields[Field.state] == "locked")),
            ("protection", .string(fields[Field.protection] ?? "unknown")),
            ("open_handles", number(Field.openHandles)),
            ("idle_lock_seconds", idleLock > 0 ? .integer(idleLock) : .null),
            ("idle_seconds", number(Field.idleSeconds)),
            ("transport", .string(fields[Field.transport] ?? "unknown")),
            ("ring_requests", number(Field.ringRequests)),
            ("polled_requests", number(Field.polledRequests)),
        ] + remoteSources(fields))
    }

    /// A remote mount's sources (its address, then each `--mirror`):
    /// `"sources": [{"address", "state", "bytes", "errors", "last_error"}]`;
    /// nothing for a local bundle.
    private static func remoteSources(_ fields: [String: String]) -> [(String, JSONValue)] {
        guard let count = Int(fields["sources"] ?? "") else { return [] }
        let sources: [JSONValue] = (0..<min(count, 64)).map { index in
            func field(_ name: String) -> String { fields["source.\(index).\(name)"] ?? "" }
            return .object([
                ("address", .string(field("address"))),
                ("state", .string(field("state"))),
                ("bytes", Int64(field("bytes")).map { .integer($0) } ?? .null),
                ("errors", Int64(field("errors")).map { .integer($0) } ?? .null),
                ("last_error", field("last_error").isEmpty ? .null : .string(field("last_error"))),
            ])
        }
        return [("sources", .array(sources))]
    }
}
