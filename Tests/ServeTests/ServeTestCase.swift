import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What every encfs-serve test needs beside the shared ToolTestCase (the
/// scratch directory, removed after the test): processes run to completion
/// with their output as bytes, a server started and stopped, and curl.
class ServeTestCase: ToolTestCase {
    /// The directory of the built `encfs-*` binaries.
    static var binDirectory: String? { Tools.binaryDirectory }

    /// This test's scratch directory (ToolTestCase's).
    var work: String { scratch.path }
    /// Servers started by this test, stopped whatever happened (registered
    /// after the scratch directory, so stopped before it is removed).
    private var servers: [Server] = []

    override func setUpWithError() throws {
        if let problem = BuiltBinaries.problem(with: "encfs-serve", in: Self.binDirectory) {
            if BuiltBinaries.firstReport() { XCTFail(problem) }
            throw XCTSkip(problem)
        }
        try super.setUpWithError()
        addTeardownBlock { [self] in for server in servers { _ = server.stop() } }
    }

    func tool(_ name: String) -> String { "\(Self.binDirectory ?? "")/\(name)" }

    // MARK: - Processes

    struct Result {
        var status: Int32
        var output: Data
        var error: Data
        var text: String { String(decoding: output, as: UTF8.self) }
        var errorText: String { String(decoding: error, as: UTF8.self) }
        var errorLines: [String] { errorText.split(separator: "\n").map(String.init) }
    }

    /// Runs `executable` to its end (killed after `timeout` seconds).
    @discardableResult
    func execute(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
             timeout: Double = 60) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = work + "/.out-\(UUID().uuidString)"
        let err = work + "/.err-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: err)
        }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            XCTFail("\(executable) \(arguments) did not finish in \(timeout) s")
        }
        return Result(status: process.terminationStatus, output: try Data(contentsOf: URL(fileURLWithPath: out)),
                      error: try Data(contentsOf: URL(fileURLWithPath: err)))
    }

    // MARK: - Bundles

    /// A fresh raw key file.
    func makeKey() throws -> String {
        let path = work + "/key"
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        try (bytes.map { String(format: "%02x", $0) }.joined() + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Packs `source` into a bundle under the work directory.
    func pack(_ source: String, key: String, name: String = "b.encfs", extra: [String] = []) throws -> String {
        let bundle = work + "/" + name
        let result = try execute(tool("encfs-pack"), [source, bundle, "--key-file", key, "--quiet"] + extra)
        XCTAssertEqual(result.status, 0, result.errorText)
        return bundle
    }

    /// A key and a bundle of one page, `index.html` holding `html`.
    func packIndexPage(_ html: String) throws -> (key: String, bundle: String) {
        let source = work + "/src"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try html.write(toFile: source + "/index.html", atomically: true, encoding: .utf8)
        let key = try makeKey()
        return (key, try pack(source, key: key))
    }

    /// Creates a file at a path given as bytes (names that are not UTF-8).
    func writeFile(_ path: [UInt8], _ contents: [UInt8]) throws {
        let fd = (path + [0]).withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        _ = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    // MARK: - Servers

    /// A running encfs-serve.
    final class Server {
        let process: Process
        let outPath: String
        let errPath: String
        /// The first URL it printed.
        var url = ""
        private var stopped: Int32?

        init(process: Process, outPath: String, errPath: String) {
            self.process = process
            self.outPath = outPath
            self.errPath = errPath
        }

        var output: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
        var log: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
        var pid: pid_t { process.processIdentifier }
        /// `http://127.0.0.1:PORT` of the first URL.
        var origin: String {
            let afterScheme = url.dropFirst("http://".count)
            return "http://" + (afterScheme.split(separator: "/").first.map(String.init) ?? "")
        }
        /// The token of the first URL.
        var token: String { url.split(separator: "/").dropFirst(2).first.map(String.init) ?? "" }

        /// SIGTERM, then the exit status.
        @discardableResult
        func stop() -> Int32 {
            if let stopped { return stopped }
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning && Date() < deadline { usleep(10000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
            stopped = process.terminationStatus
            return process.terminationStatus
        }
    }

    /// Starts encfs-serve and waits (20 s at most) for its first line.
    func serve(_ arguments: [String], environment: [String: String]? = nil, waitForURL: Bool = true,
               executable: String? = nil) throws -> Server {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable ?? tool("encfs-serve"))
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = work + "/.serve-out-\(servers.count)"
        let err = work + "/.serve-err-\(servers.count)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let server = Server(process: process, outPath: out, errPath: err)
        servers.append(server)
        guard waitForURL else { return server }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let line = server.output.split(separator: "\n").first, server.output.contains("\n") {
                server.url = String(line)
                return server
            }
            guard process.isRunning else { break }
            usleep(10000)
        }
        // A server that never comes up is the failure under test, never a
        // reason to skip.
        throw ServerDidNotStart(log: server.log)
    }

    // MARK: - curl

    struct Response {
        var status: Int
        var headers: [String: String]
        var body: Data
        var curlStatus: Int32
        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// One request with curl; headers keyed in lower case.
    func curl(_ url: String, _ extra: [String] = []) throws -> Response {
        let headers = work + "/.h-\(UUID().uuidString)"
        let body = work + "/.b-\(UUID().uuidString)"
        defer {
            try? FileManager.default.removeItem(atPath: headers)
            try? FileManager.default.removeItem(atPath: body)
        }
        let result = try execute("/usr/bin/curl", ["-sS", "--max-time", "30", "-D", headers, "-o", body, "-w", "%{http_code}"] + extra + [url])
        var fields: [String: String] = [:]
        let text = (try? String(contentsOfFile: headers, encoding: .isoLatin1)) ?? ""
        // The last response's headers (after a 1xx, only the final one).
        for line in text.components(separatedBy: "\r\n") {
            if line.hasPrefix("HTTP/") { fields = [:] }
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Response(status: Int(result.text) ?? 0, headers: fields,
                        body: (try? Data(contentsOf: URL(fileURLWithPath: body))) ?? Data(), curlStatus: result.status)
    }
}

/// encfs-serve exited or stayed silent instead of printing its URL.
struct ServerDidNotStart: Error, CustomStringConvertible {
    let log: String
    var description: String { "encfs-serve did not print its URL: \(log)" }
}
