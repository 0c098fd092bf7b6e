import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve as a process: unix sockets and their peers, refusals at
/// start, a damaged chunk, secrets, plaintext on disk, slow clients, a
/// short load, and the libraries it links.
final class ServeProcessTests: ServeTestCase {
    var source = ""
    var key = ""
    var bundle = ""
    var big: [UInt8] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = work + "/src"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try "<html><body>hi</body></html>\n".write(toFile: source + "/index.html", atomically: true, encoding: .utf8)
        big = (0..<400_000).map { _ in UInt8.random(in: 0...255) }
        _ = FileManager.default.createFile(atPath: source + "/big.bin", contents: Data(big))
        key = try makeKey()
        bundle = try pack(source, key: key)
    }

    func testBinary_LinksLibmicrohttpdAndNoLibfuse() throws {
        let needed = try execute("/usr/bin/readelf", ["-d", tool("encfs-serve")]).text
        XCTAssertTrue(needed.contains("libmicrohttpd"), needed)
        XCTAssertFalse(needed.contains("libfuse"), needed)
    }

    func testUnixSocket_ModeStaleReplacedRemovedAtExit() throws {
        chmod(work, 0o755)
        let path = work + "/serve.sock"
        // A stale socket: bound, then its owner gone.
        try execute("/usr/bin/python3", ["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])", path])
        let server = try serve([bundle, "--key-file", key, "--listen", "unix:\(path)", "--no-token"])
        XCTAssertEqual(server.url, "http://localhost/")
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let page = try curl("http://localhost/index.html", ["--unix-socket", path])
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(String(decoding: page.body, as: UTF8.self), "<html><body>hi</body></html>\n")
        XCTAssertEqual(Array(try curl("http://localhost/big.bin", ["--unix-socket", path]).body), big)
        XCTAssertEqual(try curl("http://evil.example/index.html", ["--unix-socket", path]).status, 421)

        let second = try execute(tool("encfs-serve"), [bundle, "--key-file", key, "--listen", "unix:\(path)", "--no-token"])
        XCTAssertEqual(second.status, 1, "a live socket is not replaced")
        XCTAssertEqual(second.errorLines.count, 1, second.errorText)
        XCTAssertEqual(server.stop(), 0)
        XCTAssertNotEqual(lstat(path, &st), 0, "the socket is removed at exit")

        // A listener that cannot be bound: the socket made before it goes too.
        let tcp = try serve([bundle, "--key-file", key])
        let busy = String(tcp.origin.dropFirst("http://".count))
        let failed = try execute(tool("encfs-serve"), [bundle, "--key-file", key, "--listen", "unix:\(path)", "--listen", busy])
        XCTAssertEqual(failed.status, 1, failed.errorText)
        XCTAssertEqual(failed.errorLines.count, 1, failed.errorText)
        XCTAssertNotEqual(lstat(path, &st), 0, "the unix socket made before the failure is left behind")
        tcp.stop()

        let shared = try serve([bundle, "--key-file", key, "--listen", "unix:\(path)", "--socket-mode", "660", "--json"])
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o660)
        let json = try JSONSerialization.jsonObject(with: Data(shared.output.utf8)) as? [String: Any]
        XCTAssertEqual(json?["token_required"] as? Bool, true)
        XCTAssertEqual(json?["listen"] as? [String], ["unix:\(path)"])
        let url = try XCTUnwrap(json?["url"] as? String)
        XCTAssertEqual(try curl(url + "index.html", ["--unix-socket", path]).status, 200)
        XCTAssertEqual(try curl("http://localhost/index.html", ["--unix-socket", path]).status, 404)
    }

    func testUnixSocket_PeersPassTheAccessPolicy() throws {
        guard getuid() == 0 else { throw XCTSkip("setpriv needs root") }
        chmod(work, 0o755)
        let path = work + "/peers.sock"
        let server = try serve([bundle, "--key-file", key, "--listen", "unix:\(path)", "--no-token",
                                "--socket-mode", "666", "--allow-uid", "65534"])
        XCTAssertEqual(try curl("http://localhost/index.html", ["--unix-socket", path]).status, 403, "root is not uid 65534")
        let nobody = try execute("/usr/bin/setpriv", ["--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/curl", "-s",
                                                 "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", path,
                                                 "http://localhost/index.html"])
        XCTAssertEqual(nobody.text, "200", nobody.errorText)
        server.stop()

        let curlPath = try XCTUnwrap(realpath("/usr/bin/curl", nil).map { p in defer { free(p) }; return String(cString: p) })
        let byProgram = try serve([bundle, "--key-file", key, "--listen", "unix:\(path)", "--no-token", "--allow-exe", curlPath])
        XCTAssertEqual(try curl("http://localhost/index.html", ["--unix-socket", path]).status, 200)
        let python = """
        import http.client, socket, sys
        class C(http.client.HTTPConnection):
            def connect(self):
                self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])
        c = C("localhost"); c.request("GET", "/index.html"); print(c.getresponse().status)
        """
        XCTAssertEqual(try execute("/usr/bin/python3", ["-c", python, path]).text, "403\n", "python is not the allowed program")
        byProgram.stop()
    }

    func testRefusals_AtStart_AreOneLineAndExit2() throws {
        let cases: [([String], String)] = [
            (["--no-token"], "--no-token needs every --listen to be a unix socket"),
            (["--allow-exe", "/usr/bin/curl"], "need every --listen to be a unix socket"),
            (["--allow-uid", "0"], "need every --listen to be a unix socket"),
            (["--listen", "0.0.0.0:0"], "is not a loopback address; add --listen-any"),
            (["--listen", "example.com:80"], "host names are not resolved"),
            (["--listen", "127.0.0.1:99999"], "port must be a number"),
            (["--listen", "unix:\(work)/x.sock", "--listen", "127.0.0.1:0", "--no-token"], "--no-token needs every --listen"),
        ]
        for (extra, message) in cases {
            let result = try execute(tool("encfs-serve"), [bundle, "--key-file", key] + extra)
            XCTAssertEqual(result.status, 2, "\(extra)")
            XCTAssertTrue(result.output.isEmpty, "\(extra)")
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-serve: error: ") ?? false, "\(extra): \(result.errorText)")
            XCTAssertTrue(result.errorText.contains(message), "\(extra): \(result.errorText)")
        }
    }

    func testBadBundle_OneLineAndExit1() throws {
        let garbage = work + "/garbage.encfs"
        _ = FileManager.default.createFile(atPath: garbage, contents: Data(repeating: 0x41, count: 5000))
        let otherKey = work + "/other.key"
        try String(repeating: "ab", count: 32).write(toFile: otherKey, atomically: true, encoding: .utf8)
        for (bundle, key) in [(work + "/missing.encfs", key), (garbage, key), (bundle, otherKey)] {
            let result = try execute(tool("encfs-serve"), [bundle, "--key-file", key])
            XCTAssertEqual(result.status, 1, bundle)
            XCTAssertTrue(result.output.isEmpty, "nothing on stdout")
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-serve: error: ") ?? false, result.errorText)
            XCTAssertTrue(result.errorLines.dropFirst().allSatisfy { $0.hasPrefix("hint: ") || $0.contains("hint:") }, result.errorText)
        }
    }

    func testDamagedChunk_AbortsThatResponseOnly() throws {
        // The bundle is almost all big.bin: its middle is in one of its chunks.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: bundle))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        let byte = try XCTUnwrap(handle.readData(ofLength: 1).first)
        try handle.seek(toOffset: size / 2)
        handle.write(Data([byte ^ 0x01]))
        try handle.close()
        let verify = try execute(tool("encfs-inspect"), ["verify", bundle, "--key-file", key, "--quiet"])
        XCTAssertEqual(verify.status, 1, "the flipped byte must be in a chunk")

        let server = try serve([bundle, "--key-file", key])
        let reply = try curl(server.url + "big.bin")
        XCTAssertEqual(reply.status, 200, "headers went out before the damage was found")
        XCTAssertNotEqual(reply.curlStatus, 0, "the response ends short of Content-Length")
        XCTAssertLessThan(reply.body.count, big.count)
        XCTAssertEqual(Array(reply.body), Array(big.prefix(reply.body.count)), "never a wrong byte")
        XCTAssertEqual(try curl(server.url + "big.bin", ["-r", "0-99"]).body, Data(big[0..<100]))
        XCTAssertEqual(try curl(server.url).status, 200, "other files still served")
        let line = server.log.split(separator: "\n").first { $0.contains("failed authentication") }
        XCTAssertNotNil(line, server.log)
        XCTAssertTrue(line?.contains("of inode 2") ?? false, server.log)
    }

    func testSecrets_OnlyTheTokenLeavesAndOnlyWhereAsked() throws {
        let hexKey = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let urlFile = work + "/url"
        let logFile = work + "/serve.log"
        var environment = ProcessInfo.processInfo.environment
        environment["ENCFS_KEY"] = hexKey
        let server = try serve([bundle, "--url-file", urlFile, "--log-file", logFile], environment: environment)
        var st = stat()
        XCTAssertEqual(lstat(urlFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(try String(contentsOfFile: urlFile, encoding: .utf8), server.output)
        _ = try curl(server.url)
        _ = try curl(server.origin + "/nothing")
        _ = try curl(server.url + "missing")
        let environ = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(server.pid)/environ"))
        let cmdline = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(server.pid)/cmdline"))
        XCTAssertNil(environ.range(of: Data(hexKey.utf8)), "the key left the environment")
        XCTAssertNil(cmdline.range(of: Data(server.token.utf8)))
        XCTAssertEqual(server.stop(), 0)
        let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        XCTAssertFalse(log.contains(server.token), log)
        XCTAssertFalse(log.contains(hexKey))
        XCTAssertFalse(server.log.contains(server.token))
    }

    func testPlaintext_NotOnDiskAfterServing() throws {
        let marker = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let marked = work + "/marked"
        try FileManager.default.createDirectory(atPath: marked, withIntermediateDirectories: true)
        try String(repeating: "\(marker)\n", count: 5000).write(toFile: marked + "/m.txt", atomically: true, encoding: .utf8)
        let markedBundle = try pack(marked, key: key, name: "marked.encfs")
        let server = try serve([markedBundle, "--key-file", key])
        let fetched = try execute("/bin/sh", ["-c", "curl -s \"$1\" | grep -c \"$2\"", "sh", server.url + "m.txt", marker])
        XCTAssertEqual(fetched.text, "5000\n")
        let search = #"find "$1" -xdev -type f -size -64M ! -path "$2/*" -print0 2>/dev/null | xargs -0 -r grep -a -l -F -e "$3" 2>/dev/null; exit 0"#
        var hits: [String] = []
        for place in [markedBundle, work, "/tmp", FileManager.default.currentDirectoryPath] {
            hits += try execute("/bin/sh", ["-c", search, "sh", place, marked, marker], timeout: 240).text
                .split(separator: "\n").map(String.init)
        }
        XCTAssertEqual(server.stop(), 0)
        XCTAssertEqual(hits, [], "plaintext found on disk")
    }

    func testSlowClients_DoNotStopOthers() throws {
        let server = try serve([bundle, "--key-file", key, "--max-connections", "16", "--timeout", "2"])
        let port = String(server.origin.split(separator: ":").last!)
        // 12 clients that send half a request and then nothing, held open
        // while a normal client is served; then 16 more than the limit,
        // which the idle timeout clears.
        let script = """
        import socket, subprocess, sys, time
        port, url, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
        slow = []
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nX-Slow: ")
            slow.append(s)
        status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--retry", "20",
                                 "--retry-all-errors", "--retry-delay", "1", "--max-time", "60", url],
                                capture_output=True, text=True).stdout
        closed = 0
        for s in slow:
            try:
                closed += s.recv(1) == b""
            except OSError:
                closed += 1
        print(status, closed)
        """
        XCTAssertEqual(try execute("/usr/bin/python3", ["-c", script, port, server.url + "big.bin", "12"], timeout: 120).text.split(separator: " ").first, "200")
        let saturated = try execute("/usr/bin/python3", ["-c", script, port, server.url + "big.bin", "16"], timeout: 120).text
        let fields = saturated.split(separator: " ")
        XCTAssertEqual(fields.first, "200", "served once the idle ones were cut off: \(saturated)")
        XCTAssertEqual(fields.last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }, "16", "every slow client was cut off")
    }

    func testShortLoad_NoErrorsAndExactBytes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/wrk") else { throw XCTSkip("wrk is not installed") }
        let server = try serve([bundle, "--key-file", key])
        for target in ["index.html", "big.bin"] {
            let load = try execute("/usr/bin/wrk", ["-t", "2", "-c", "8", "-d", "3s", server.url + target], timeout: 60)
            XCTAssertEqual(load.status, 0, load.errorText)
            XCTAssertFalse(load.text.contains("Non-2xx"), load.text)
            XCTAssertFalse(load.text.contains("Socket errors"), load.text)
            XCTAssertTrue(load.text.contains("requests in"), load.text)
        }
        XCTAssertEqual(Array(try curl(server.url + "big.bin").body), big)
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
        print("encfs-serve peak RSS after load: \(peak ?? "?")")
        XCTAssertEqual(server.stop(), 0)
    }
}
