import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's per-connection limits, which libmicrohttpd does not have
/// (ConnectionGuard): the header deadline against slowloris clients and
/// the request rate, through real clients.
final class ServeLimitTests: ServeTestCase {
    var key = ""
    var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        (key, bundle) = try packIndexPage("<html><body>limits</body></html>\n")
    }

    /// Every connection slot is taken by a client that trickles a request
    /// header one byte a second (which resets libmicrohttpd's idle
    /// timeout, 30 s here, every time): the header deadline cuts them off,
    /// and a normal client, retrying while the slots are full, is served.
    func testSlowloris_TricklingClientsCutOff_OthersServed() throws {
        let server = try serve([bundle, "--key-file", key, "--max-connections", "16", "--timeout", "30", "--header-timeout", "3"])
        let port = String(server.origin.split(separator: ":").last!)
        let script = """
        import socket, subprocess, sys, threading, time
        port, url = int(sys.argv[1]), sys.argv[2]
        slow, cut = [], []
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            slow.append(s)
        def trickle(s):
            header = b"GET /index.html HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nX-Slow: " + b"a" * 200
            for i in range(len(header)):
                try:
                    s.sendall(header[i:i + 1])
                    s.settimeout(1)
                    if s.recv(1) == b"":
                        cut.append(s); return
                except socket.timeout:
                    continue
                except OSError:
                    cut.append(s); return
        threads = [threading.Thread(target=trickle, args=(s,)) for s in slow]
        for t in threads: t.start()
        time.sleep(0.5)
        status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--retry", "40",
                                 "--retry-all-errors", "--retry-delay", "1", "--max-time", "120", url],
                                capture_output=True, text=True).stdout
        for t in threads: t.join()
        print(status, len(cut))
        """
        let result = try execute("/usr/bin/python3", ["-c", script, port, server.url + "index.html"], timeout: 300)
        let fields = result.text.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertEqual(fields.first, "200", "a normal client is served: \(result.text) \(result.errorText)")
        XCTAssertEqual(fields.last, "16", "every trickling client was cut off before its header was complete: \(result.text)")
    }

    /// One keep-alive connection asks faster than `--max-request-rate 2`:
    /// the request over the limit gets 429 and the connection is closed;
    /// a new connection is served.
    func testRequestRate_OverTheLimit_429AndClosed() throws {
        let server = try serve([bundle, "--key-file", key, "--max-request-rate", "2"])
        // Raw HTTP/1.1 on one socket: whether the server closed it after
        // the 429 is seen as end of file, which a client library would
        // hide by reconnecting.
        let script = """
        import socket, sys, urllib.parse
        u = urllib.parse.urlparse(sys.argv[1])
        s = socket.create_connection((u.hostname, u.port), timeout=30)
        f = s.makefile("rb")
        request = ("GET %sindex.html HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % (u.path, u.port)).encode()
        statuses = []
        for _ in range(50):
            s.sendall(request)
            status = int(f.readline().split()[1]); length = 0
            while True:
                line = f.readline()
                if line in (b"\\r\\n", b""): break
                if line.lower().startswith(b"content-length:"): length = int(line.split(b":")[1])
            f.read(length)
            statuses.append(status)
            if status == 429: break
        try:
            after = "closed" if f.read(1) == b"" else "open"
        except OSError:
            after = "closed"
        print(statuses[0], statuses[-1], after)
        """
        let result = try execute("/usr/bin/python3", ["-c", script, server.url], timeout: 120)
        XCTAssertEqual(result.text, "200 429 closed\n", result.errorText)
        XCTAssertEqual(try curl(server.url + "index.html").status, 200, "a new connection is served")
        // No limit with 0: the same 50 requests are all answered.
        let unlimited = try serve([bundle, "--key-file", key, "--max-request-rate", "0"])
        let all = try execute("/usr/bin/python3", ["-c", script.replacingOccurrences(of: "f.read(1)", with: "b'x'"), unlimited.url],
                              timeout: 120)
        XCTAssertEqual(all.text, "200 200 open\n", all.errorText)
    }

    func testLimitOptions_BadValuesRefused() throws {
        for (arguments, message) in [
            (["--max-request-rate", "-1"], "encfs-serve: error: --max-request-rate must be a number of requests per second from 0 (no limit) to 1000000"),
            (["--header-timeout", "0"], "encfs-serve: error: --header-timeout must be a number of seconds from 1 to 3600"),
        ] {
            let result = try execute(tool("encfs-serve"), [bundle, "--key-file", key] + arguments)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertEqual(result.errorLines.first, message, "\(arguments)")
        }
    }
}
