import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An S3 server on 127.0.0.1 that enforces AWS Signature V4: moto in
/// server mode, run by Scripts/s3-test-server.py, which also issues and
/// revokes session credentials on request (moto never expires a session
/// by itself). Starting moto takes seconds: one per test class
/// (started by the first test that needs it), stopped by the class's
/// teardown.
public final class S3Server: Sendable {
    public let port: Int
    private let process: SpawnedProcess
    private let commands = Mutex<Void>(())

    /// Session credentials issued by the server.
    public struct Session: Sendable {
        public var id: String
        public var secret: String
        /// The secret with its first character changed, so the server
        /// refuses it; always different from ``secret`` (a fixed "x" in
        /// front was the secret itself whenever it began with "x").
        public var wrongSecret: String { (secret.first == "x" ? "y" : "x") + secret.dropFirst() }
        public var token: String
    }

    /// A Python that has moto (Scripts/install-deps.sh installs it for
    /// the system's python3; a pyenv one may have it instead).
    public static func python() throws -> String {
        for candidate in [Tools.python, "python3"] {
            if let result = try? Subprocess.run(candidate, ["-c", "import moto.server, boto3"]), result.status == 0 { return candidate }
        }
        throw SubprocessError("moto is not installed (pip install 'moto[server]'; Scripts/install-deps.sh)")
    }

    public init(directory: String) throws {
        var started: (SpawnedProcess, Int)?
        for _ in 0..<3 where started == nil {
            let port = try RemoteServer.freePort()
            let process = try SpawnedProcess(try Self.python(), ["\(Tools.repositoryRoot)/Scripts/s3-test-server.py", String(port)],
                                             standardErrorFile: "\(directory)/moto-\(port).stderr", feedStandardInput: true)
            if let line = process.readLine(deadline: Deadline(seconds: 60)), line.contains("\"ready\": true") {
                started = (process, port)
            } else {
                process.signal(SIGKILL)
                _ = process.wait(deadline: Deadline(seconds: 10))
            }
        }
        guard let (process, port) = started else { throw SubprocessError("the S3 server (moto) did not start") }
        self.process = process
        self.port = port
    }

    /// `http://127.0.0.1:PORT`, or with `host` (`localhost`, whose
    /// subdomains libcurl resolves to 127.0.0.1: virtual-hosted requests).
    public func endpoint(host: String = "127.0.0.1") -> String { "http://\(host):\(port)" }

    /// Sends one command and returns its JSON answer.
    private func command(_ line: String) throws -> [String: Any] {
        try commands.withLock { _ in
            process.write(line + "\n")
            guard let answer = process.readLine(deadline: Deadline(seconds: 30)),
                  let json = try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any] else {
                throw SubprocessError("the S3 server did not answer \(line.split(separator: " ").first ?? "")")
            }
            if let error = json["error"] as? String { throw SubprocessError("S3 server: \(error)") }
            return json
        }
    }

    /// Uploads `file` as `s3://bucket/key`.
    public func put(bucket: String, key: String, file: String) throws {
        _ = try command("put \(bucket) \(key) \(file)")
    }

    /// New session credentials (AssumeRole).
    public func session() throws -> Session {
        let json = try command("session")
        guard let id = json["id"] as? String, let secret = json["secret"] as? String, let token = json["token"] as? String else {
            throw SubprocessError("no session from the S3 server")
        }
        return Session(id: id, secret: secret, token: token)
    }

    /// Revokes the session `id`: its requests are refused from now on.
    public func revoke(_ id: String) throws { _ = try command("revoke \(id)") }

    public func stop() {
        process.closeStandardInput()
        if process.wait(deadline: Deadline(seconds: 5)) == nil {
            process.signal(SIGKILL)
            _ = process.wait(deadline: Deadline(seconds: 10))
        }
    }
}
