import CryptCore
import EncFSCLI
import EncFSCore
import EncFSService
#if canImport(Glibc)
import Glibc
#endif

/// A running encfs-serve: the bundle open, the listeners bound, one
/// ``HTTPEndpoint`` each.
final class ServeServer {
    let plan: ServePlan
    let token: [UInt8]?
    let endpoints: [HTTPEndpoint]
    /// The control socket (`--name`); started by ``run(diagnostics:)``.
    let control: ControlServer?
    /// Every endpoint's per-connection limits; its reaper thread runs
    /// while the server does.
    let connections: ConnectionGuard
    /// How long requests in flight may take to finish after SIGTERM.
    static let drainTime: Duration = .seconds(5)

    private init(plan: ServePlan, token: [UInt8]?, endpoints: [HTTPEndpoint], control: ControlServer?, connections: ConnectionGuard) {
        self.plan = plan
        self.connections = connections
        self.token = token
        self.endpoints = endpoints
        self.control = control
    }

    /// Opens the bundle, reads or makes the token, binds every listener:
    /// everything that can fail, before anything is printed.
    static func open(_ plan: ServePlan, args: ArgumentParser.Result) throws -> ServeServer {
        let options = try ReaderOptions.openOptions(from: args)
        let source: any ByteSource = RemoteCommandLine.isRemote(plan.bundle)
            ? try RemoteCommandLine.source(for: plan.bundle, options: try RemoteCommandLine.options(from: args), args: args)
            : try FileByteSource(path: plan.bundle)
        // Handed over at once: the bundle holds the only reference, so a
        // lock wipes the keys by dropping it.
        let reader = plan.lock.startsLocked ? ReaderHandoff(nil)
            : ReaderHandoff(try BundleReader.open(source: source, materials: try KeyOptions.gather(from: args, confirm: false),
                                                  options: options))
        let bundle = LockableBundle(reader: reader.take(), source: source, options: options,
                                    indexCacheBytes: IndexPages.defaultCacheBytes)
        let token = plan.requiresToken ? try ServeToken.make(file: plan.tokenFile) : nil
        let log = try ServeToken.log(file: plan.logFile)
        var settings = plan.settings
        settings.token = token
        let handler = RequestHandler(settings: settings, types: ContentTypes())
        let listeners: [Listener]
        do {
            if let passed = try Listener.fromSystemd(acceptsAnyHost: plan.acceptsAnyHost) {
                guard plan.requiresToken || passed.allSatisfy(\.isUnix) else {
                    throw UsageError("--no-token needs every socket systemd passes to be a unix socket")
                }
                guard !plan.rules.restrictsCallers || passed.allSatisfy(\.isUnix) else {
                    throw UsageError("--allow-* rules need every socket systemd passes to be a unix socket")
                }
                listeners = passed
            } else {
                var bound: [Listener] = []
                do {
                    for address in plan.addresses {
                        bound.append(try Listener.bind(address, socketMode: plan.socketMode, acceptsAnyHost: plan.acceptsAnyHost))
                    }
                } catch {
                    // Sockets made before the one that failed are not left behind.
                    bound.forEach { $0.removeSocketFile() }
                    throw error
                }
                listeners = bound
            }
        } catch let error as ListenAddress.Invalid {
            throw UsageError(error.reason)
        }
        let rules = try AccessOptions.resolvingExecutables(plan.rules)
        let admission = rules.restrictsCallers ? CallerAdmission(rules: rules) { log.log("warning", $0) } : nil
        let wipesBodies = plan.lock.protection != .unlessOpen
        let connections = ConnectionGuard(requestsPerSecond: plan.limits.requestsPerSecond, headerSeconds: plan.limits.headerSeconds)
        let readAhead = ReadAhead.forThisMachine()
        let bodies = BodyBuffers(keptBuffers: 32)
        let endpoints = listeners.map {
            HTTPEndpoint(listener: $0, bundle: bundle, wipesBodiesAtLock: wipesBodies, handler: handler, log: log, admission: admission,
                         connections: connections, readAhead: readAhead, bodies: bodies)
        }
        var control: ControlServer?
        if let name = plan.name, let directory = plan.lock.controlDirectory {
            let controller = ServeControl(bundle: bundle, lockSettings: plan.lock, name: name, endpoints: endpoints, log: log)
            do {
                control = try ControlServer(controller: controller, socketPath: ControlSocket.path(forServer: name, in: directory),
                                            directory: directory)
            } catch {
                listeners.forEach { $0.removeSocketFile() }
                throw error
            }
        }
        return ServeServer(plan: plan, token: token, endpoints: endpoints, control: control, connections: connections)
    }

    /// Serves until SIGTERM or SIGINT.
    ///
    /// - Returns: 0 once stopped.
    func run(diagnostics: Diagnostics) throws -> Int32 {
        // Blocked before libmicrohttpd's threads start, so they inherit
        // the mask and only sigwait below sees the signals. Their
        // disposition is reset first: one ignored by whoever started us
        // (systemd-socket-activate ignores SIGTERM) is discarded on
        // arrival and would never reach sigwait.
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
        defer { endpoints.forEach { $0.listener.removeSocketFile() } }
        try connections.start()
        defer { connections.stop() }
        for endpoint in endpoints { try endpoint.start(plan.limits) }
        try control?.start()
        defer { control?.stop() }
        let tokenPath = token.map { String(decoding: $0, as: UTF8.self) + "/" } ?? ""
        let urls = endpoints.map { $0.listener.url + tokenPath }
        let text: String
        if plan.json {
            let object: JSONValue = .object([
                ("url", .string(urls[0])),
                ("urls", .array(urls.map { .string($0) })),
                ("listen", .array(endpoints.map { .string($0.listener.display) })),
                ("token_required", .bool(token != nil)),
            ])
            text = String(decoding: object.serialized, as: UTF8.self) + "\n"
        } else {
            text = urls.joined(separator: "\n") + "\n"
        }
        if let urlFile = plan.urlFile {
            let file = try AtomicFile(destination: urlFile, mode: 0o600)
            try Array(text.utf8).withUnsafeBytes { try file.file.writeAll($0) }
            try file.commit()
        }
        try Array(text.utf8).withUnsafeBytes { try OutputStream().writeDirect($0) }
        _ = ServiceNotifier.fromEnvironment()?.send(["READY=1", "STATUS=serving"])
        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        _ = ServiceNotifier.fromEnvironment()?.send(["STOPPING=1"])
        let deadline = ContinuousClock.now + Self.drainTime
        for endpoint in endpoints { endpoint.stop(deadline: deadline) }
        return ExitCode.success
    }
}
