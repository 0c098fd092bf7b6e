import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// nginx serving one directory on 127.0.0.1 (ranges and ETags, as S3 and
/// CDNs do), run as a foreground child with a scratch prefix and config,
/// and optionally the fault proxy (Scripts/fault-proxy.py) in front of it.
/// Both are stopped by the owning test's teardown, also on failure.
final class RemoteServer: Sendable {
    /// The directory served.
    let root: String
    /// nginx's port.
    let port: Int
    private let nginx: SpawnedProcess
    private let proxy: SpawnedProcess?
    /// The proxy's port, when started with one.
    let proxyPort: Int?
    /// With `tls`: the self-signed certificate nginx serves (PEM), which
    /// clients must be told to trust.
    let certificate: String?

    /// Starts nginx (and the proxy when `withProxy`) and waits until they
    /// accept connections.
    ///
    /// - Throws: `SubprocessError` when nginx is missing or does not start
    ///   within 10 s.
    init(test: MountTestCase, withProxy: Bool, tls: Bool = false) throws {
        let scratch = test.scratch
        root = try scratch.makeDirectory(test.uniqueName("www"))
        let prefix = try scratch.makeDirectory(test.uniqueName("nginx"))
        guard access("/usr/sbin/nginx", X_OK) == 0 else {
            throw SubprocessError("nginx is not installed (Scripts/install-deps.sh installs it)")
        }
        var listen = ""
        var tlsDirectives = ""
        if tls {
            let key = scratch.url(test.uniqueName("tls.key"))
            let certificate = scratch.url(test.uniqueName("tls.pem"))
            let made = try Subprocess.run("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                                      "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=127.0.0.1",
                                                      "-addext", "subjectAltName=IP:127.0.0.1"])
            guard made.status == 0 else { throw SubprocessError(made.summary) }
            listen = " ssl"
            tlsDirectives = "ssl_certificate \(certificate); ssl_certificate_key \(key);"
            self.certificate = certificate
        } else {
            certificate = nil
        }
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
              access_log \(prefix)/access.log;
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
            if Deadline.poll(seconds: 10, { Self.accepts(port) || !process.isRunning }), process.isRunning {
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
    func url(_ name: String, query: String = "", direct: Bool = false) -> String {
        "\(certificate == nil ? "http" : "https")://127.0.0.1:\(direct ? port : (proxyPort ?? port))/\(name)\(query)"
    }

    /// Stops nginx (the proxy keeps running and answers 502).
    func stopNginx() {
        nginx.signal(SIGKILL)
        _ = nginx.wait(deadline: Deadline(seconds: 10))
    }

    func stop() {
        for process in [nginx, proxy].compactMap({ $0 }) {
            process.signal(SIGKILL)
            _ = process.wait(deadline: Deadline(seconds: 10))
        }
    }

    // MARK: - The proxy's controls

    /// The proxy's counters: requests and response body bytes since the
    /// last ``resetProxy()``.
    func proxyStats() throws -> (requests: Int, bytes: Int, authSeen: Int) {
        let json = try control("stats")
        return (json["requests"] as? Int ?? -1, json["bytes"] as? Int ?? -1, json["auth_seen"] as? Int ?? -1)
    }

    /// Sets the proxy's fault (`mode` with its parameters) for the next
    /// `count` requests, or until changed.
    func setFault(_ mode: String, count: Int? = nil, _ parameters: [String: String] = [:]) throws {
        var query = ["mode": mode].merging(parameters) { a, _ in a }
        if let count { query["count"] = String(count) }
        _ = try control("set?" + query.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
            .joined(separator: "&"))
    }

    func resetProxy() throws { _ = try control("reset") }

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

    // MARK: - Ports

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SubprocessError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw SubprocessError("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
