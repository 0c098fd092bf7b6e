import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Remote bundles over HTTPS, against nginx on 127.0.0.1 with a
/// certificate signed by an authority each test makes with openssl:
/// `--ca-file` trusts that authority and nothing else, and a server that
/// offers HTTP/2 is read over HTTP/2, ranges and `If-Match` pinning
/// included (nginx's access log says which protocol each request used).
final class RemoteTLSTests: RemoteTestCase {
    func testHTTPS_TrustsTheCAFileOnly() throws {
        let server = try RemoteServer(test: self, withProxy: false, transport: .https)
        let published = try publish(server, ["t.bin": 200_000])
        let authority = try XCTUnwrap(server.certificate)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--ca-file", authority])
        assertSuccess(try run("/usr/bin/diff", ["-r", published.source, mounted.mountpoint]))
        unmount(mounted)
        // No --ca-file (the system's authorities) and another authority:
        // each refused at once with one line that says why, not retried
        // until the 30 s deadline; a file that holds no certificate is
        // refused before any request.
        let stranger = try RemoteServer.makeAuthority(test: self, name: "some other CA").certificate
        let notACertificate = try scratch.write(uniqueName("not-a-ca.pem"), Array("hello\n".utf8))
        for (extra, message) in [([], "TLS: SSL certificate problem: unable to get local issuer certificate"),
                                 (["--ca-file", stranger], "TLS: SSL certificate problem: unable to get local issuer certificate"),
                                 (["--ca-file", notACertificate], "--ca-file holds no PEM certificate")] {
            let mountpoint = try scratch.makeDirectory(uniqueName("mnt-untrusted"))
            let requestsBefore = try server.accessLog().count
            let refused = try run(try Tools.mount(), [server.url("bundle.encfs"), mountpoint, "--key-file", published.key,
                                                      "--net-timeout", "30"] + extra, timeout: 20)
            XCTAssertEqual(refused.status, 1, "\(extra): \(refused.summary)")
            XCTAssertEqual(refused.errorLines.count, 1, refused.errorOutput)
            XCTAssertEqual(refused.errorLines.first?.hasPrefix("encfs-mount: error: "), true, refused.errorOutput)
            XCTAssertTrue(refused.errorOutput.contains(message), "\(extra): \(refused.errorOutput)")
            XCTAssertFalse(MountTable.isMounted(mountpoint))
            XCTAssertEqual(try server.accessLog().count, requestsBefore, "\(extra): a request got through")
        }
    }

    func testHTTP2_RangesAndPinningOverHTTP2() throws {
        let server = try RemoteServer(test: self, withProxy: false, transport: .http2)
        let published = try publish(server, ["a.bin": 1_500_000, "dir/b.bin": 300_000, "gap.bin": 1 << 20, "late.bin": 300_000],
                                    chunkSize: "64K")
        let authority = try XCTUnwrap(server.certificate)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--ca-file", authority, "--fetch-size", "64K"])
        let atMount = try server.accessLog()
        XCTAssertEqual(atMount.count, 2, "requests before the mount served: \(atMount)")
        XCTAssertEqual(atMount.first?.ifMatch, "-", "the opening request has nothing to match yet")
        XCTAssertEqual(try digests("\(mounted.mountpoint)/dir"), try digests("\(published.source)/dir"))
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<10 {
            let offset = Int(generator.next() % 1_400_000)
            let count = Int(generator.next() % 100_000) + 1
            XCTAssertEqual(try pread(mounted.path("a.bin"), offset: offset, count: count).result,
                           try expected("\(published.source)/a.bin", offset: offset, count: count), "pread \(count) at \(offset)")
        }
        let log = try server.accessLog()
        XCTAssertGreaterThan(log.count, 2)
        XCTAssertEqual(log.filter { $0.protocolName != "HTTP/2.0" }, [], "requests that did not use HTTP/2")
        XCTAssertEqual(log.filter { $0.status != 206 || !$0.range.hasPrefix("bytes=") }, [], "requests that were not answered with a range")
        // Every request after the first is pinned to the ETag nginx gave.
        let etag = try XCTUnwrap(log.dropFirst().first?.ifMatch)
        XCTAssertTrue(etag.hasPrefix("\"") && etag.count > 2, etag)
        XCTAssertEqual(log.dropFirst().filter { $0.ifMatch != etag }, [], "requests without the pinned If-Match")

        // Another bundle renamed over it: HTTP/2 carries the 412, uncached
        // reads fail, cached ones are served.
        let replacement = try scratch.makeDirectory("replacement")
        _ = try scratch.write("replacement/other", Array(repeating: 7, count: 1000))
        let staged = "\(server.root)/staged.encfs"
        try packOrThrow(replacement, staged, keyFile: published.key)
        XCTAssertEqual(rename(staged, published.bundle), 0)
        try dropKernelCaches()
        XCTAssertEqual(try digests("\(mounted.mountpoint)/dir"), try digests("\(published.source)/dir"))
        XCTAssertEqual(try pread(mounted.path("late.bin"), offset: 100_000).result, "EIO")
        // (Read-ahead after the listing may have met the 412 first.)
        let refused = try server.accessLog().dropFirst(log.count)
        XCTAssertFalse(refused.isEmpty)
        XCTAssertEqual(refused.filter { $0.status != 412 || $0.protocolName != "HTTP/2.0" }, [], "\(refused)")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("replaced") }.count, 1, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }
}
