import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `--mirror`: two (or three) nginx servers holding the same bundle, the
/// first behind the fault proxy (Scripts/fault-proxy.py) to stall or lose
/// it mid-read. Reads go on from the next source, a mirror serving another
/// bundle is refused and reported, and with every source down a read
/// fails with EIO while cached data is still served.
final class RemoteMirrorTests: RemoteTestCase {
    /// The same bundle on `mirrors` more servers (copied as it is).
    private func mirrored(_ count: Int, _ sizes: [String: Int]) throws
        -> (primary: RemoteServer, mirrors: [RemoteServer], source: String, key: String) {
        let primary = try RemoteServer(test: self, withProxy: true)
        let published = try publish(primary, sizes, chunkSize: "64K")
        var mirrors: [RemoteServer] = []
        for _ in 0..<count {
            let mirror = try RemoteServer(test: self, withProxy: false)
            try FileManager.default.copyItem(atPath: published.bundle, toPath: "\(mirror.root)/bundle.encfs")
            mirrors.append(mirror)
        }
        return (primary, mirrors, published.source, published.key)
    }

    private func sources(_ mountpoint: String) throws -> [[String: Any]] {
        let status = try check(try Tools.ctl(), [mountpoint, "status", "--json"]).output
        let json = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        return json?["sources"] as? [[String: Any]] ?? []
    }

    func testPrimaryStalledThenKilled_ReadsContinueFromMirror() throws {
        let (primary, mirrors, source, key) = try mirrored(1, ["a.bin": 3 << 20, "b.bin": 3 << 20])
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: key,
                                      ["--mirror", mirrors[0].url("bundle.encfs"), "--net-timeout", "6"])
        XCTAssertEqual(try pread(mounted.path("a.bin"), offset: 0).result, try expected("\(source)/a.bin", offset: 0))
        // The primary stalls mid-body: the mirror serves the rest.
        try primary.setFault("stall", ["after": "1000"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        var states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.count, 2)
        XCTAssertEqual(states.first?["state"] as? String, "set-aside", "\(states)")
        XCTAssertGreaterThan(states.first?["errors"] as? Int ?? 0, 0, "\(states)")
        XCTAssertEqual(states.last?["state"] as? String, "healthy", "\(states)")
        XCTAssertGreaterThan(states.last?["bytes"] as? Int ?? 0, 0, "\(states)")
        XCTAssertEqual(states.last?["address"] as? String, mirrors[0].url("bundle.encfs"))
        // The primary is gone for good (the proxy answers 502).
        try primary.setFault("pass")
        primary.stopNginx()
        XCTAssertEqual(try sha256(mounted.path("b.bin")), try sha256("\(source)/b.bin"))
        states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.last?["state"] as? String, "healthy", "\(states)")
        unmount(mounted)
    }

    func testMirrorWithAnotherBundle_RefusedAndReported() throws {
        let (primary, mirrors, source, key) = try mirrored(1, ["a.bin": 2 << 20])
        // A second mirror holding another bundle (its own id and index).
        let other = try RemoteServer(test: self, withProxy: false)
        let otherSource = try scratch.makeDirectory(uniqueName("other-src"))
        try Data(repeating: 7, count: 2 << 20).write(to: URL(fileURLWithPath: "\(otherSource)/a.bin"))
        try packOrThrow(otherSource, "\(other.root)/bundle.encfs", keyFile: key, ["--chunk-size", "64K"])
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: key,
                                      ["--mirror", other.url("bundle.encfs"), "--mirror", mirrors[0].url("bundle.encfs"),
                                       "--net-timeout", "6"])
        primary.stopNginx()
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        let states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.map { $0["state"] as? String ?? "" }, ["set-aside", "refused", "healthy"], "\(states)")
        XCTAssertTrue((states[1]["last_error"] as? String ?? "").contains("not the bundle"), "\(states)")
        unmount(mounted)
    }

    func testAllSourcesDown_EIOWithinDeadline_CachedStillServed() throws {
        // b.bin is long enough that read-ahead after a.bin leaves its end
        // uncached.
        let (primary, mirrors, source, key) = try mirrored(1, ["a.bin": 600_000, "b.bin": 6 << 20])
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: key,
                                      ["--mirror", mirrors[0].url("bundle.encfs"), "--net-timeout", "3"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        primary.stopNginx()
        mirrors[0].stopNginx()
        try dropKernelCaches()
        let failed = try pread(mounted.path("b.bin"), offset: 5 << 20)
        XCTAssertEqual(failed.result, "EIO")
        // A hang guard only, not a timing assertion.
        XCTAssertLessThan(failed.seconds, 30)
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"), "cached data no longer served")
        unmount(mounted)
    }

    /// The main address stalls from the first byte at mount time: the
    /// opening request (header, then index) goes to the mirror, the mount
    /// succeeds, and status shows the main address set aside.
    func testMainStalledAtMount_MountsFromMirror() throws {
        let (primary, mirrors, source, key) = try mirrored(1, ["a.bin": 2 << 20, "b.bin": 300_000])
        try primary.setFault("stall")
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: key,
                                      ["--mirror", mirrors[0].url("bundle.encfs"), "--net-timeout", "6"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        XCTAssertEqual(try sha256(mounted.path("b.bin")), try sha256("\(source)/b.bin"))
        let states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.map { $0["state"] as? String ?? "" }, ["set-aside", "healthy"], "\(states)")
        XCTAssertGreaterThan(states.first?["errors"] as? Int ?? 0, 0, "\(states)")
        try primary.setFault("pass")
        unmount(mounted)
    }

    /// The main address is a closed port: the mount comes from the mirror,
    /// and `encfs-inspect` opens the bundle through it too.
    func testMainRefusedAtMount_MountsFromMirror() throws {
        let (_, mirrors, source, key) = try mirrored(1, ["a.bin": 1 << 20])
        let closed = "http://127.0.0.1:\(try closedPort())/bundle.encfs"
        let mounted = try mountRemote(closed, key: key, ["--mirror", mirrors[0].url("bundle.encfs"), "--net-timeout", "6"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        let states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.map { $0["state"] as? String ?? "" }, ["set-aside", "healthy"], "\(states)")
        unmount(mounted)
        let listed = try check(try Tools.inspect(), ["ls", closed, "--key-file", key, "--mirror", mirrors[0].url("bundle.encfs"),
                                                          "--net-timeout", "6"])
        XCTAssertTrue(listed.output.contains("a.bin"), listed.output)
    }

    /// The main address stalls at mount time, then comes back serving
    /// another bundle of the same size: once its backoff ends it is
    /// checked like a mirror before its first use (header, index tag),
    /// refused, and the mirror keeps serving.
    func testMainDownAtMount_ComesBackWithAnotherBundle_Refused() throws {
        let sizes = ["a.bin": 1 << 20, "b.bin": 1 << 20]
        let (primary, mirrors, source, key) = try mirrored(1, sizes)
        let otherSource = try scratch.makeDirectory(uniqueName("other-src"))
        // Random bytes: chunks of one repeated byte would be stored once.
        for (name, size) in sizes {
            try Data((0..<size).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: "\(otherSource)/\(name)"))
        }
        let other = "\(scratch.path)/\(uniqueName("other")).encfs"
        try packOrThrow(otherSource, other, keyFile: key, ["--chunk-size", "64K"])
        let attributes = { (path: String) in try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int }
        XCTAssertEqual(try attributes(other), try attributes("\(primary.root)/bundle.encfs"), "not the same size: the size check alone would refuse it")
        try primary.setFault("stall")
        // --net-timeout 2 (mountRemote's): the main address's backoff is 2 s.
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: key, ["--mirror", mirrors[0].url("bundle.encfs")])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(source)/a.bin"))
        try FileManager.default.removeItem(atPath: "\(primary.root)/bundle.encfs")
        try FileManager.default.copyItem(atPath: other, toPath: "\(primary.root)/bundle.encfs")
        try primary.setFault("pass")
        // Past the backoff: the next read tries the main address first.
        usleep(2_500_000)
        XCTAssertEqual(try sha256(mounted.path("b.bin")), try sha256("\(source)/b.bin"))
        let states = try sources(mounted.mountpoint)
        XCTAssertEqual(states.map { $0["state"] as? String ?? "" }, ["refused", "healthy"], "\(states)")
        XCTAssertTrue((states[0]["last_error"] as? String ?? "").contains("not the bundle"), "\(states)")
        unmount(mounted)
    }

    /// A loopback port nothing listens on (bound, then closed).
    private func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw XCTSkip("cannot bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
