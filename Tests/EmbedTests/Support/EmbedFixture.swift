import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What the C and Python tests of libencfs share, made once per test
/// process: the bundles of Tests/EmbedTests/Fixture/make_fixture.py, the
/// pkg-config file beside libencfs.so (Scripts/make-pkgconfig.sh), and
/// nginx serving the fixture on 127.0.0.1. Removed and stopped when the
/// test bundle finishes.
final class EmbedFixture: @unchecked Sendable {
    /// The fixture's directory (see make_fixture.py for what it holds).
    let directory: String
    /// The release build: encfs-pack, encfs-keygen, libencfs.so.
    let binDirectory: String
    /// Where encfs.pc is.
    var pkgConfigPath: String { binDirectory + "/pkgconfig" }
    /// http://127.0.0.1:PORT/ serving `directory`.
    let baseURL: String
    private let nginx: Process

    static let root = BuiltBinaries.repositoryRoot

    static func shared() throws -> EmbedFixture { try cache.get() }

    private static let cache: Swift.Result<EmbedFixture, any Error> = Swift.Result {
        let fixture = try EmbedFixture()
        XCTestObservationCenter.shared.addTestObserver(Cleanup(fixture))
        return fixture
    }

    private init() throws {
        binDirectory = try Self.builtDirectory()
        directory = try TemporaryDirectory.make(prefix: "encfs-embed-tests.")
        try Self.check("/usr/bin/env", ["python3", Self.root + "/Tests/EmbedTests/Fixture/make_fixture.py", directory, binDirectory])
        try Self.check("/bin/bash", [Self.root + "/Scripts/make-pkgconfig.sh"], environment: ["ENCFS_BIN_DIR": binDirectory])
        (nginx, baseURL) = try Self.serve(directory)
    }

    /// `$ENCFS_BIN_DIR` or .build/release, once libencfs.so and the tools
    /// in it are there and up to date.
    private static func builtDirectory() throws -> String {
        var dir = ProcessInfo.processInfo.environment["ENCFS_BIN_DIR"] ?? ""
        if dir.isEmpty { dir = root + "/.build/release" }
        for name in ["encfs-pack", "encfs-keygen"] {
            if let problem = BuiltBinaries.problem(with: name, in: dir) {
                if BuiltBinaries.firstReport() { XCTFail(problem) }
                throw XCTSkip("binaries not usable, see the first failure")
            }
        }
        guard access(dir + "/libencfs.so", R_OK) == 0 else { throw XCTSkip("no libencfs.so in \(dir): \(BuiltBinaries.remedy)") }
        return dir
    }

    /// nginx serving `directory` on a free port of 127.0.0.1 (ranges and
    /// ETags, as an object store serves a bundle).
    private static func serve(_ directory: String) throws -> (Process, String) {
        guard access("/usr/sbin/nginx", X_OK) == 0 else { throw Failure("nginx is not installed (Scripts/install-deps.sh)") }
        let prefix = directory + "/nginx"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw Failure("no free port on 127.0.0.1") }
            let config = """
            worker_processes 1; daemon off; master_process off; pid \(prefix)/pid; error_log \(prefix)/error.log;
            events { worker_connections 64; }
            http { access_log off; client_body_temp_path \(prefix)/b; proxy_temp_path \(prefix)/p;
                   fastcgi_temp_path \(prefix)/f; uwsgi_temp_path \(prefix)/u; scgi_temp_path \(prefix)/s;
                   server { listen 127.0.0.1:\(port); root \(directory); } }
            """
            try config.write(toFile: "\(prefix)/nginx.conf", atomically: true, encoding: .utf8)
            let nginx = Process()
            nginx.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
            nginx.arguments = ["-p", prefix, "-c", "\(prefix)/nginx.conf"]
            nginx.standardError = FileHandle.nullDevice
            try nginx.run()
            for _ in 0..<100 where nginx.isRunning {
                if LoopbackPort.accepts(port) { return (nginx, "http://127.0.0.1:\(port)/") }
                usleep(50_000)
            }
            nginx.terminate()
            nginx.waitUntilExit()
        }
        throw Failure("nginx did not start")
    }

    /// The path of `name` in the fixture.
    func path(_ name: String) -> String { directory + "/" + name }

    /// Runs a command, failing the test with its output unless it exits 0.
    @discardableResult
    static func check(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                      directory: String? = nil) throws -> Run {
        let run = try Run(executable, arguments, environment: environment, directory: directory)
        guard run.status == 0 else {
            throw Failure("`\(executable) \(arguments.joined(separator: " "))` exited \(run.status):\n\(run.output)")
        }
        return run
    }

    private final class Cleanup: NSObject, XCTestObservation, @unchecked Sendable {
        private let fixture: EmbedFixture
        init(_ fixture: EmbedFixture) { self.fixture = fixture }

        func testBundleDidFinish(_ testBundle: Bundle) {
            fixture.nginx.terminate()
            fixture.nginx.waitUntilExit()
            try? FileManager.default.removeItem(atPath: fixture.directory)
        }
    }
}

/// A finished command: its exit status and its stdout and stderr together.
struct Run {
    let status: Int32
    let output: String

    /// Runs `executable` to completion, stdin from /dev/null, with
    /// `environment` added to this process's.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardInput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do { try process.run() } catch { throw Failure("cannot start \(executable): \(error)") }
        let bytes = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        status = process.terminationStatus
        output = String(decoding: bytes, as: UTF8.self)
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
