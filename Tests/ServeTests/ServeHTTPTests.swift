import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's HTTP as curl sees it: headers, ranges, conditions,
/// methods, hosts, tokens, directories and names, through the real binary
/// on 127.0.0.1.
final class ServeHTTPTests: ServeTestCase {
    var source = ""
    var key = ""
    var bundle = ""
    var big: [UInt8] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = work + "/src"
        try FileManager.default.createDirectory(atPath: source + "/css", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: source + "/sub", withIntermediateDirectories: true)
        try "<html><link rel=stylesheet href=\"css/site.css\"><body>hi</body></html>\n"
            .write(toFile: source + "/index.html", atomically: true, encoding: .utf8)
        try "body { color: red }\n".write(toFile: source + "/css/site.css", atomically: true, encoding: .utf8)
        try "a\n".write(toFile: source + "/sub/a.txt", atomically: true, encoding: .utf8)
        try "page\n".write(toFile: source + "/sub/home.htm", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: source + "/empty.txt", contents: Data())
        var generator = SystemRandomNumberGenerator()
        big = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        _ = FileManager.default.createFile(atPath: source + "/big.bin", contents: Data(big))
        try writeFile(Array((source + "/new\nline.txt").utf8), Array("newline\n".utf8))
        try writeFile(Array((source + "/caf").utf8) + [0xE9] + Array(".txt".utf8), Array("latin1\n".utf8))
        try FileManager.default.createSymbolicLink(atPath: source + "/link.css", withDestinationPath: "css/site.css")
        key = try makeKey()
        bundle = try pack(source, key: key)
    }

    func testFile_CarriesEveryHeader() throws {
        let server = try serve([bundle, "--key-file", key])
        XCTAssertTrue(server.url.hasPrefix("http://127.0.0.1:"), server.url)
        XCTAssertEqual(server.token.count, 32, "128 random bits as hex")
        let page = try curl(server.url)
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.body, FileManager.default.contents(atPath: source + "/index.html"))
        XCTAssertEqual(page.header("Content-Type"), "text/html")
        XCTAssertEqual(page.header("Content-Length"), "\(page.body.count)")
        XCTAssertEqual(page.header("X-Content-Type-Options"), "nosniff")
        XCTAssertEqual(page.header("Cache-Control"), "no-store")
        XCTAssertEqual(page.header("Accept-Ranges"), "bytes")
        XCTAssertNotNil(page.header("ETag"))
        XCTAssertNotNil(page.header("Last-Modified").flatMap { $0.hasSuffix(" GMT") ? $0 : nil })
        let css = try curl(server.url + "css/site.css")
        XCTAssertEqual(css.header("Content-Type"), "text/css")
        XCTAssertNotEqual(css.header("ETag"), page.header("ETag"))
        let blob = try curl(server.url + "big.bin")
        XCTAssertEqual(blob.status, 200)
        XCTAssertEqual(Array(blob.body), big)
        XCTAssertEqual(blob.header("Content-Type"), "application/octet-stream")
        XCTAssertEqual(try curl(server.url + "link.css").body, css.body, "an internal symlink is followed")
        let head = try curl(server.url + "big.bin", ["-I"])
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "300000")
        XCTAssertNil(head.header("Transfer-Encoding"))
        XCTAssertEqual(try curl(server.url + "empty.txt").header("Content-Length"), "0")

        let other = try serve([bundle, "--key-file", key, "--cache-control", "private, max-age=60"])
        XCTAssertEqual(try curl(other.url).header("Cache-Control"), "private, max-age=60")
        XCTAssertEqual(server.stop(), 0)
    }

    func testListeners_IPv6AndLocalhost_EachServesItsURL() throws {
        let server = try serve([bundle, "--key-file", key, "--listen", "[::1]:0", "--listen", "localhost:0", "--json"])
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(server.output.utf8)) as? [String: Any])
        let urls = try XCTUnwrap(json["urls"] as? [String])
        XCTAssertEqual(urls.count, 2)
        XCTAssertTrue(urls[0].hasPrefix("http://[::1]:"), "\(urls)")
        XCTAssertTrue(urls[1].hasPrefix("http://localhost:"), "\(urls)")
        XCTAssertEqual(json["url"] as? String, urls[0])
        for url in urls {
            XCTAssertEqual(try curl(url + "css/site.css").status, 200, url)
            XCTAssertEqual(try curl(url + "css/site.css", ["-H", "Host: attacker.example"]).status, 421, url)
        }
        XCTAssertEqual(server.stop(), 0)
    }

    func testRanges_FirstLastSuffixPastEndAndSeveral() throws {
        let server = try serve([bundle, "--key-file", key])
        let url = server.url + "big.bin"
        func range(_ spec: String) throws -> Response { try curl(url, ["-H", "Range: \(spec)"]) }
        let first = try range("bytes=0-0")
        XCTAssertEqual(first.status, 206)
        XCTAssertEqual(first.header("Content-Range"), "bytes 0-0/300000")
        XCTAssertEqual(Array(first.body), [big[0]])
        let last = try range("bytes=299999-299999")
        XCTAssertEqual(last.header("Content-Range"), "bytes 299999-299999/300000")
        XCTAssertEqual(Array(last.body), [big[299_999]])
        let suffix = try range("bytes=-100")
        XCTAssertEqual(suffix.status, 206)
        XCTAssertEqual(Array(suffix.body), Array(big[299_900...]))
        let open = try range("bytes=70000-")
        XCTAssertEqual(Array(open.body), Array(big[70000...]))
        XCTAssertEqual(open.header("Content-Length"), "230000")
        let clipped = try range("bytes=299990-400000")
        XCTAssertEqual(clipped.header("Content-Range"), "bytes 299990-299999/300000")
        let pastEnd = try range("bytes=300000-")
        XCTAssertEqual(pastEnd.status, 416)
        XCTAssertEqual(pastEnd.header("Content-Range"), "bytes */300000")
        XCTAssertEqual(try range("bytes=-0").status, 416)
        let spanning = try range("bytes=65530-65545")
        XCTAssertEqual(Array(spanning.body), Array(big[65530...65545]), "a range across chunk boundaries")
        let merged = try range("bytes=10-19, 15-29")
        XCTAssertEqual(merged.status, 206)
        XCTAssertEqual(Array(merged.body), Array(big[10...29]))
        let several = try range("bytes=0-9, 100-109")
        XCTAssertEqual(several.status, 200, "disjoint ranges: the whole file")
        XCTAssertEqual(Array(several.body), big)
        for ignored in ["bytes=9-1", "items=0-1", "bytes=abc", "bytes=99999999999999999999999-"] {
            let reply = try range(ignored)
            XCTAssertEqual(reply.status, 200, ignored)
            XCTAssertEqual(reply.body.count, 300_000, ignored)
        }
        XCTAssertEqual(try range("bytes=18446744073709551615-").status, 416)
        XCTAssertEqual(try curl(server.url + "empty.txt", ["-H", "Range: bytes=0-"]).status, 416)
        let stale = try curl(url, ["-H", "Range: bytes=0-0", "-H", "If-Range: \"other\""])
        XCTAssertEqual(stale.status, 200, "If-Range that does not match: the whole file")
    }

    func testConditions_Answer304() throws {
        let server = try serve([bundle, "--key-file", key])
        let url = server.url + "css/site.css"
        let full = try curl(url)
        let tag = try XCTUnwrap(full.header("ETag"))
        let matched = try curl(url, ["-H", "If-None-Match: \(tag)"])
        XCTAssertEqual(matched.status, 304)
        XCTAssertTrue(matched.body.isEmpty)
        XCTAssertEqual(matched.header("ETag"), tag)
        XCTAssertEqual(try curl(url, ["-H", "If-None-Match: \"x\", W/\(tag)"]).status, 304)
        XCTAssertEqual(try curl(url, ["-H", "If-None-Match: *"]).status, 304)
        XCTAssertEqual(try curl(url, ["-H", "If-None-Match: \"other\""]).status, 200)
        let modified = try XCTUnwrap(full.header("Last-Modified"))
        XCTAssertEqual(try curl(url, ["-H", "If-Modified-Since: \(modified)"]).status, 304)
        XCTAssertEqual(try curl(url, ["-H", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT"]).status, 200)
        XCTAssertEqual(try curl(url, ["-H", "If-Modified-Since: yesterday"]).status, 200)
        let tagRange = try curl(url, ["-H", "Range: bytes=0-3", "-H", "If-Range: \(tag)"])
        XCTAssertEqual(tagRange.status, 206)
    }

    func testMethodsHostsAndTokens() throws {
        let server = try serve([bundle, "--key-file", key])
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            let reply = try curl(server.url, ["-X", method])
            XCTAssertEqual(reply.status, 405, method)
            XCTAssertEqual(reply.header("Allow"), "GET, HEAD", method)
        }
        XCTAssertEqual(try curl(server.url, ["-H", "Host: evil.example"]).status, 421)
        XCTAssertEqual(try curl(server.url, ["-H", "Host: evil.example:\(server.origin.split(separator: ":").last!)"]).status, 421)
        let port = String(server.origin.split(separator: ":").last!)
        XCTAssertEqual(try curl(server.url, ["-H", "Host: localhost:\(port)"]).status, 200)
        let missing = try curl(server.origin + "/index.html")
        XCTAssertEqual(missing.status, 404)
        XCTAssertTrue(missing.body.isEmpty, "no hint")
        XCTAssertEqual(try curl(server.origin + "/").status, 404)
        var wrong = Array(server.token)
        wrong[0] = wrong[0] == "0" ? "1" : "0"
        XCTAssertEqual(try curl(server.origin + "/\(String(wrong))/index.html").status, 404)
        XCTAssertEqual(try curl(server.origin + "/index.html", ["-H", "Authorization: Bearer \(server.token)"]).status, 200)
        XCTAssertEqual(try curl(server.origin + "/index.html", ["-H", "Authorization: Bearer \(String(wrong))"]).status, 404)
        let bare = try curl(server.origin + "/\(server.token)")
        XCTAssertEqual(bare.status, 301)
        XCTAssertEqual(bare.header("Location"), "/\(server.token)/")
    }

    func testTokenFile_FixedTokenAndShortOnesRefused() throws {
        let tokenFile = work + "/token"
        let token = "Supervisor-Chosen_Token.0123456789~abc"
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try serve([bundle, "--key-file", key, "--token-file", tokenFile])
        XCTAssertTrue(server.url.hasSuffix("/\(token)/"), server.url)
        XCTAssertEqual(try curl(server.url + "css/site.css").status, 200)
        XCTAssertEqual(try curl(server.origin + "/css/site.css").status, 404)
        for bad in ["short-token", "has a space in it somewhere long", String(repeating: "é", count: 30)] {
            try (bad + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
            let refused = try execute(tool("encfs-serve"), [bundle, "--key-file", key, "--token-file", tokenFile])
            XCTAssertEqual(refused.status, 1, bad)
            XCTAssertTrue(refused.output.isEmpty)
            XCTAssertEqual(refused.errorLines.count, 1, refused.errorText)
            XCTAssertFalse(refused.errorText.contains(bad), "the token file's contents are not shown")
        }
    }

    func testDirectories_IndexRedirectAndListing() throws {
        let server = try serve([bundle, "--key-file", key])
        let redirect = try curl(server.url + "sub")
        XCTAssertEqual(redirect.status, 301)
        XCTAssertEqual(redirect.header("Location"), "/\(server.token)/sub/")
        XCTAssertEqual(try curl(server.url + "sub/").status, 404, "no index, no listing")
        XCTAssertEqual(try curl(server.url + "index.html/").status, 404)
        XCTAssertEqual(try curl(server.url + "sub/../css/site.css").status, 200)
        XCTAssertEqual(try curl(server.url + "%2e%2e/%2e%2e/css/site.css", ["--path-as-is"]).status, 200, "'..' stays inside")
        XCTAssertEqual(try curl(server.url + "nothing").status, 404)

        let listing = try serve([bundle, "--key-file", key, "--list-directories", "--index", "home.htm"])
        XCTAssertEqual(String(decoding: try curl(listing.url + "sub/").body, as: UTF8.self), "page\n")
        let root = try curl(listing.url)
        XCTAssertEqual(root.status, 200, "root has no home.htm: listed")
        let html = String(decoding: root.body, as: UTF8.self)
        XCTAssertTrue(html.contains("href=\"new%0Aline.txt\""), html)
        XCTAssertTrue(html.contains("href=\"caf%E9.txt\""), html)
        XCTAssertTrue(html.contains("href=\"sub/\""), html)

        let none = try serve([bundle, "--key-file", key, "--no-index"])
        XCTAssertEqual(try curl(none.url).status, 404)
    }

    func testNames_NewlineAndNotUTF8_AreReachable() throws {
        let server = try serve([bundle, "--key-file", key])
        XCTAssertEqual(String(decoding: try curl(server.url + "new%0Aline.txt").body, as: UTF8.self), "newline\n")
        XCTAssertEqual(String(decoding: try curl(server.url + "caf%E9.txt").body, as: UTF8.self), "latin1\n")
        XCTAssertEqual(try curl(server.url + "caf%e9.txt").status, 200)
    }

    func testMalformedRequests_Get4xxAndTheServerGoesOn() throws {
        let server = try serve([bundle, "--key-file", key])
        XCTAssertEqual(try curl(server.url + "bad%zz").status, 400)
        XCTAssertEqual(try curl(server.url + "bad%4").status, 400)
        XCTAssertEqual(try curl(server.url + "nul%00.txt").status, 400)
        let headerFile = work + "/big-header"
        try ("X-Big: " + String(repeating: "x", count: 200_000) + "\n").write(toFile: headerFile, atomically: true, encoding: .utf8)
        let big = try curl(server.url, ["-H", "@\(headerFile)"])
        XCTAssertTrue([400, 413, 414, 431].contains(big.status) || big.curlStatus != 0, "oversized header: \(big.status)")
        let script = """
        import socket, sys
        for raw in [b"GARBAGE\\r\\n\\r\\n", b"GET\\r\\n\\r\\n", b"GET / HTTP/9.9\\r\\nHost: x\\r\\n\\r\\n",
                    b"\\x00\\xff\\xfe\\r\\n\\r\\n", b"GET http://evil/x HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n"]:
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
            s.sendall(raw)
            reply = b""
            try:
                while True:
                    data = s.recv(4096)
                    if not data: break
                    reply += data
                    if b"\\r\\n\\r\\n" in reply: break
            except socket.timeout:
                pass
            s.close()
            print(reply.split(b"\\r\\n")[0].decode("latin-1"))
        """
        let port = String(server.origin.split(separator: ":").last!)
        let result = try execute("/usr/bin/python3", ["-c", script, port])
        for line in result.text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            let code = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            XCTAssertTrue(line.isEmpty || (400..<500).contains(code) || (500..<506).contains(code), "\(line)")
        }
        XCTAssertEqual(try curl(server.url).status, 200, "still serving")
        XCTAssertEqual(server.stop(), 0)
    }
}
