import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// nginx serving one directory on 127.0.0.1 (ranges and ETags, as S3 and
/// CDNs do), run as a foreground child with a scratch prefix and config,
/// and optionally the fault proxy (Scripts/fault-proxy.py) in front of it.
/// Both are stopped by the owning test's teardown, also on failure.
public final class RemoteServer: Sendable {
    /// The directory served.
    public let root: String
    /// nginx's port.
    public let port: Int
    private let nginx: SpawnedProcess
    private let proxy: SpawnedProcess?
    /// The proxy's port, when started with one.
    public let proxyPort: Int?
    /// With `tls`: the certificate of the authority that signed nginx's
    /// (PEM), made for this server alone, which clients must be told to
    /// trust (`--ca-file`).
    public let certificate: String?
    /// nginx's access log: one ``AccessLogLine`` per request.
    public let accessLogPath: String

    /// How nginx serves.
    public enum Transport {
        case http
        /// TLS with a certificate signed by a scratch authority.
        case https
        /// The same, offering HTTP/2 (ALPN `h2`) besides HTTP/1.1.
        case http2
    }

    /// Starts nginx (and the proxy when `withProxy`) and waits until they
    /// accept connections.
    ///
    /// - Throws: `SubprocessError` when nginx is missing or does not start
    ///   within 10 s.
    public convenience init(test: ToolTestCase, withProxy: Bool, tls: Bool = false) throws {
        try self.init(test: test, withProxy: withProxy, transport: tls ? .https : .http)
    }

    public init(test: ToolTestCase, withProxy: Bool, transport: Transport) throws {
        let scratch = test.scratch
        root = try scratch.makeDirectory(test.uniqueName("www"))
        let prefix = try scratch.makeDirectory(test.uniqueName("nginx"))
        guard access("/usr/sbin/nginx", X_OK) == 0 else {
            throw SubprocessError("nginx is not installed (Scripts/install-deps.sh installs it)")
        }
        var listen = ""
        var tlsDirectives = ""
        if transport != .http {
            let authority = try Self.makeAuthority(test: test, name: "encfs test CA")
            let key = scratch.url(test.uniqueName("tls.key"))
            let request = scratch.url(test.uniqueName("tls.csr"))
            let certificate = scratch.url(test.uniqueName("tls.pem"))
            let extensions = try scratch.write(test.uniqueName("tls.ext"), Array("subjectAltName=IP:127.0.0.1\n".utf8))
            for arguments in [["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                               "-out", request, "-subj", "/CN=127.0.0.1"],
                              ["x509", "-req", "-in", request, "-CA", authority.certificate, "-CAkey", authority.key,
                               "-CAcreateserial", "-days", "1", "-extfile", extensions, "-out", certificate]] {
                let made = try Subprocess.run("openssl", arguments)
                guard made.status == 0 else { throw SubprocessError(made.summary) }
            }
            listen = transport == .http2 ? " ssl http2" : " ssl"
            tlsDirectives = "ssl_certificate \(certificate); ssl_certificate_key \(key);"
            self.certificate = authority.certificate
        } else {
            certificate = nil
        }
        accessLogPath = "\(prefix)/access.log"
        var started: (SpawnedProcess, Int)?
        // A free port: bind to 0, read it, close, hand it to nginx; retried
        // if another process took it meanwhile.
        for _ in 0..<5 where started == nil {
            let port = try Self.freePort()
            let config = """
            worker_processes 1;
            daemon off;
            master_process off;
            error_log \(prefix)/error.log;
            pid \(prefix)/nginx.pid;
            events { worker_connections 256; }
            http {
              log_format encfs '$server_protocol $status "$http_range" "$http_if_match" $body_bytes_sent';
              access_log \(accessLogPath) encfs;
              client_body_temp_path \(prefix)/body;
              proxy_temp_path \(prefix)/proxy;
              fastcgi_temp_path \(prefix)/fastcgi;
              uwsgi_temp_path \(prefix)/uwsgi;
              scgi_temp_path \(prefix)/scgi;
              keepalive_requests 100000;
              server { listen 127.0.0.1:\(port)\(listen); root \(root); \(tlsDirectives) }
            }
            """
            let configPath = try scratch.write(test.uniqueName("nginx.conf"), Array(config.utf8))
            let process = try SpawnedProcess("/usr/sbin/nginx", ["-p", prefix, "-c", configPath],
                                             standardErrorFile: "\(prefix)/stderr")
            if Deadline.poll(seconds: 10, { LoopbackPort.accepts(port) || !process.isRunning }), process.isRunning {
                started = (process, port)
            } else {
                process.signal(SIGKILL)
            }
        }
        guard let (nginx, port) = started else { throw SubprocessError("nginx did not start") }
        self.nginx = nginx
        self.port = port
        if withProxy {
            let portFile = scratch.url(test.uniqueName("proxy.port"))
            let proxy = try SpawnedProcess(Tools.python, ["\(Tools.repositoryRoot)/Scripts/fault-proxy.py", "0", String(port), portFile],
                                           standardErrorFile: scratch.url(test.uniqueName("proxy.stderr")))
            self.proxy = proxy
            var found: Int?
            _ = Deadline.poll(seconds: 10) {
                found = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
                return found != nil || !proxy.isRunning
            }
            guard let found else {
                nginx.signal(SIGKILL)
                proxy.signal(SIGKILL)
                throw SubprocessError("the fault proxy did not start")
            }
            proxyPort = found
        } else {
            proxy = nil
            proxyPort = nil
        }
        let server = self
        test.addTeardownBlock { server.stop() }
    }

    /// The address of `name` in the served directory, through the proxy
    /// when there is one.
    public func url(_ name: String, query: String = "", direct: Bool = false) -> String {
        "\(certificate == nil ? "http" : "https")://127.0.0.1:\(direct ? port : (proxyPort ?? port))/\(name)\(query)"
    }

    /// Stops nginx (the proxy keeps running and answers 502).
    public func stopNginx() {
        nginx.signal(SIGKILL)
        _ = nginx.wait(deadline: Deadline(seconds: 10))
    }

    public func stop() {
        for process in [nginx, proxy].compactMap({ $0 }) {
            process.signal(SIGKILL)
            _ = process.wait(deadline: Deadline(seconds: 10))
        }
    }

    // MARK: - The proxy's controls

    /// The proxy's counters: requests and response body bytes since the
    /// last ``resetProxy()``.
    public func proxyStats() throws -> (requests: Int, bytes: Int, authSeen: Int) {
        let json = try control("stats")
        return (json["requests"] as? Int ?? -1, json["bytes"] as? Int ?? -1, json["auth_seen"] as? Int ?? -1)
    }

    /// Client connections that carried a request since the last
    /// ``resetProxy()``.
    public func proxyConnectionsUsed() throws -> Int {
        try control("stats")["connections"] as? Int ?? -1
    }

    /// When the client closed each connection the proxy held in a stall
    /// since the last ``resetProxy()`` (monotonic seconds, the proxy's
    /// clock), and how many it still holds.
    public func proxyStalls() throws -> (ends: [Double], open: Int) {
        let json = try control("stats")
        return ((json["stall_ends"] as? [Any] ?? []).compactMap { ($0 as? NSNumber)?.doubleValue }, json["stalled"] as? Int ?? -1)
    }

    /// Sets the proxy's fault (`mode` with its parameters) for the next
    /// `count` requests, or until changed.
    public func setFault(_ mode: String, count: Int? = nil, _ parameters: [String: String] = [:]) throws {
        var query = ["mode": mode].merging(parameters) { a, _ in a }
        if let count { query["count"] = String(count) }
        _ = try control("set?" + query.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
            .joined(separator: "&"))
    }

    public func resetProxy() throws { _ = try control("reset") }

    private func control(_ path: String) throws -> [String: Any] {
        guard let proxyPort else { throw SubprocessError("no proxy") }
        let result = try Subprocess.run(Tools.python, ["-c", """
            import sys, urllib.request
            sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
            """, "http://127.0.0.1:\(proxyPort)/__proxy/\(path)"], timeout: 20)
        guard result.status == 0, let json = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any] else {
            throw SubprocessError("proxy control failed: \(result.summary)")
        }
        return json
    }

    // MARK: - TLS and the access log

    /// A certificate authority made with openssl for one test (P-256,
    /// valid one day): its certificate and key in scratch.
    public static func makeAuthority(test: ToolTestCase, name: String) throws -> (certificate: String, key: String) {
        let key = test.scratch.url(test.uniqueName("ca.key"))
        let certificate = test.scratch.url(test.uniqueName("ca.pem"))
        let made = try Subprocess.run("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                                  "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=\(name)",
                                                  "-addext", "basicConstraints=critical,CA:TRUE",
                                                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        guard made.status == 0 else { throw SubprocessError(made.summary) }
        return (certificate, key)
    }

    /// One request as nginx logged it.
    public struct AccessLogLine: Equatable {
        /// `HTTP/1.1` or `HTTP/2.0`.
        public var protocolName: String
        public var status: Int
        /// The `Range` header sent ("-" for none).
        public var range: String
        /// The `If-Match` header sent ("-" for none).
        public var ifMatch: String
        public var bodyBytes: Int

        public init(protocolName: String, status: Int, range: String, ifMatch: String, bodyBytes: Int) {
            self.protocolName = protocolName
            self.status = status
            self.range = range
            self.ifMatch = ifMatch
            self.bodyBytes = bodyBytes
        }
    }

    /// The requests nginx has logged so far (it writes each line when the
    /// response is done).
    public func accessLog() throws -> [AccessLogLine] {
        let text = (try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            // PROTOCOL STATUS "RANGE" "IF-MATCH" BYTES; an ETag is quoted
            // itself, which nginx logs as \x22.
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, let status = Int(fields[1]), let lastSpace = fields[2].lastIndex(of: " "),
                  let bytes = Int(fields[2][fields[2].index(after: lastSpace)...]) else {
                throw SubprocessError("unexpected access log line: \(line)")
            }
            let quoted = fields[2][..<lastSpace].split(separator: "\" \"", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).replacingOccurrences(of: "\\x22", with: "\"") }
            guard quoted.count == 2 else { throw SubprocessError("unexpected access log line: \(line)") }
            return AccessLogLine(protocolName: String(fields[0]), status: status, range: quoted[0], ifMatch: quoted[1], bodyBytes: bytes)
        }
    }

    // MARK: - Ports

    public static func freePort() throws -> Int {
        guard let port = LoopbackPort.free() else { throw SubprocessError("no free port on 127.0.0.1") }
        return port
    }
}
