import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// How encfs-serve starts in a service manager and from a remote bundle:
/// READY=1 on NOTIFY_SOCKET, sockets passed by systemd (LISTEN_FDS), and
/// an http:// bundle served by nginx.
final class ServeStartTests: ServeTestCase {
    var key = ""
    var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        (key, bundle) = try packIndexPage("hello\n")
    }

    func testReadiness_SentOnNotifySocketOnceServing() throws {
        let notify = work + "/notify"
        // Listens for the datagrams, prints them, until READY=1 came.
        let listener = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(30)
        open(sys.argv[1] + ".bound", "w").close()
        while True:
            message = s.recv(4096).decode()
            print(message.replace("\\n", " "), flush=True)
            if "READY=1" in message: break
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", listener, notify]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: notify + ".bound") { usleep(10000) }
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify
        let server = try serve([bundle, "--key-file", key], environment: environment)
        process.waitUntilExit()
        let received = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(received.contains("READY=1"), received)
        XCTAssertEqual(try curl(server.url).status, 200, "serving once ready")
        XCTAssertEqual(server.stop(), 0)
    }

    func testSocketActivation_ServesThePassedUnixSocket() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            throw XCTSkip("systemd-socket-activate is not installed")
        }
        let path = work + "/activated.sock"
        // systemd-socket-activate listens, and execs encfs-serve with
        // LISTEN_FDS at the first connection (the same pid: the server is
        // stopped by SIGTERM like any other).
        let server = try serve(["-l", path, tool("encfs-serve"), bundle, "--key-file", key, "--no-token"], waitForURL: false,
                               executable: "/usr/bin/systemd-socket-activate")
        for _ in 0..<500 where access(path, F_OK) != 0 { usleep(10000) }
        // curl through popen, which waits for its own child: Foundation's
        // Process stops reaping children once systemd-socket-activate runs
        // among them (the curl stays a zombie, isRunning stays true).
        let command = "curl -s --max-time 30 --retry 5 --retry-connrefused --unix-socket '\(path)' -w ' %{http_code}' http://localhost/index.html"
        guard let pipe = popen(command, "r") else { throw POSIXError(.EIO) }
        var reply = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, pipe)
            if n == 0 { break }
            reply += buffer[0..<n]
        }
        XCTAssertEqual(pclose(pipe), 0)
        XCTAssertEqual(String(decoding: reply, as: UTF8.self), "hello\n 200", "--no-token is allowed on a unix socket systemd passed")
        // The URL line follows the start of the listener's threads, which
        // may answer the first request before it is written.
        for _ in 0..<1000 where server.output.isEmpty { usleep(10000) }
        XCTAssertEqual(server.output, "http://localhost/\n")
        XCTAssertEqual(server.stop(), 0)
    }

    func testRemoteBundle_ServedFromNginx() throws {
        let nginx = try RemoteServer(test: self, withProxy: false)
        defer { nginx.stop() }
        try FileManager.default.copyItem(atPath: bundle, toPath: nginx.root + "/b.encfs")
        let server = try serve([nginx.url("b.encfs"), "--key-file", key, "--cache-dir", work + "/cache"])
        let page = try curl(server.url)
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(String(decoding: page.body, as: UTF8.self), "hello\n")
        XCTAssertEqual(server.stop(), 0)
    }
}
