import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-ctl MNT access-log --json` and `--prefetch-list`: what one mount
/// read is recorded, and a second mount given that list fetches it in the
/// background right after mounting, so that its first reads of those
/// files make no request (counted by Scripts/fault-proxy.py).
final class RemotePrefetchListTests: RemoteTestCase {
    func testAccessLog_ThenPrefetchList_FirstReadsMakeNoRequest() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 1 << 20, "b.bin": 3 << 20, "c.bin": 1 << 20], chunkSize: "64K")
        let url = server.url("bundle.encfs")
        // Record: all of a.bin, a piece of c.bin.
        let first = try mountRemote(url, key: published.key)
        XCTAssertEqual(try sha256(first.path("a.bin")), try sha256("\(published.source)/a.bin"))
        _ = try pread(first.path("c.bin"), offset: 100_000)
        let json = try check(try Tools.ctl(), [first.mountpoint, "access-log", "--json"]).output
        let files = (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["files"] as? [[String: Any]] ?? []
        XCTAssertEqual(files.compactMap { $0["path"] as? String }, ["a.bin", "c.bin"], json)
        XCTAssertEqual((files.first?["chunks"] as? [[Int]])?.first, [0, 15], "a.bin's 16 chunks: \(json)")
        let text = try check(try Tools.ctl(), [first.mountpoint, "access-log"]).output
        XCTAssertTrue(text.hasPrefix("a.bin: chunks 0-15\n"), text)
        unmount(first)
        let list = try scratch.write(uniqueName("list.json"), Array(json.utf8))

        // Replay on a fresh cache: the listed bytes arrive before any read.
        let cache = try scratch.makeDirectory(uniqueName("cache"))
        let second = try mountRemote(url, key: published.key, cache: cache, ["--prefetch-list", list])
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.cachedBytes(cache)) ?? 0) >= 1 << 20 },
                      "the listed files did not reach the cache")
        var settled = -1
        _ = Deadline.poll(seconds: 10, interval: 0.5) {
            let now = (try? server.proxyStats().requests) ?? -1
            defer { settled = now }
            return now == settled
        }
        try server.resetProxy()
        XCTAssertEqual(try pread(second.path("a.bin"), offset: 500_000).result,
                       try expected("\(published.source)/a.bin", offset: 500_000))
        XCTAssertEqual(try pread(second.path("c.bin"), offset: 100_000).result,
                       try expected("\(published.source)/c.bin", offset: 100_000))
        XCTAssertEqual(try server.proxyStats().requests, 0, "a first read of a listed file made a request")
        // Not listed: fetched on demand.
        _ = try pread(second.path("b.bin"), offset: 2 << 20)
        XCTAssertGreaterThan(try server.proxyStats().requests, 0)
        unmount(second)

        // The other form: paths, one per line.
        let paths = try scratch.write(uniqueName("list.txt"), Array("# start-up files\nc.bin\n".utf8))
        let cache3 = try scratch.makeDirectory(uniqueName("cache"))
        let third = try mountRemote(url, key: published.key, cache: cache3, ["--prefetch-list", paths])
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.cachedBytes(cache3)) ?? 0) >= 1 << 20 })
        _ = Deadline.poll(seconds: 10, interval: 0.5) {
            let now = (try? server.proxyStats().requests) ?? -1
            defer { settled = now }
            return now == settled
        }
        try server.resetProxy()
        XCTAssertEqual(try sha256(third.path("c.bin")), try sha256("\(published.source)/c.bin"))
        XCTAssertEqual(try server.proxyStats().requests, 0, "reading a listed file whole made a request")
        unmount(third)
    }

    /// Two small listed files with a long one between them, and fetch
    /// units longer than all three: only the listed files' chunks are
    /// fetched, not the whole units that hold them (which would bring the
    /// long file along), and their first reads still make no request.
    func testPrefetchList_FetchesOnlyListedChunks() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 256 << 10, "b.bin": 4 << 20, "c.bin": 256 << 10], chunkSize: "64K")
        let paths = try scratch.write(uniqueName("list.txt"), Array("c.bin\na.bin\n".utf8))
        let cache = try scratch.makeDirectory(uniqueName("cache"))
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                      ["--prefetch-list", paths, "--fetch-size", "8M"])
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.cachedBytes(cache)) ?? 0) >= 400 << 10 },
                      "the listed files did not reach the cache")
        var settled = -1
        _ = Deadline.poll(seconds: 10, interval: 0.5) {
            let now = (try? server.proxyStats().requests) ?? -1
            defer { settled = now }
            return now == settled
        }
        XCTAssertLessThan(try cachedBytes(cache), 1 << 20, "more than the listed files was fetched")
        try server.resetProxy()
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        XCTAssertEqual(try sha256(mounted.path("c.bin")), try sha256("\(published.source)/c.bin"))
        XCTAssertEqual(try server.proxyStats().requests, 0, "a first read of a listed file made a request")
        unmount(mounted)
    }
    /// Thirty-two small files side by side in the bundle, all listed (in an
    /// order that is not the bundle's): their first units are fetched
    /// together, in fewer requests than there are files (counted from
    /// before the mount, its opening requests included), and their first
    /// reads still make no request.
    func testPrefetchList_AdjacentFilesCoalesced() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let names = (0..<32).map { String(format: "f%02d.bin", $0) }
        let published = try publish(server, Dictionary(uniqueKeysWithValues: names.map { ($0, 20_000) }), chunkSize: "64K")
        let paths = try scratch.write(uniqueName("list.txt"), Array((names.reversed().joined(separator: "\n") + "\n").utf8))
        let cache = try scratch.makeDirectory(uniqueName("cache"))
        try server.resetProxy()
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache, ["--prefetch-list", paths])
        // The first 64 KiB came with the opening request and are not cached.
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.cachedBytes(cache)) ?? 0) >= 28 * 20_000 },
                      "the listed files did not reach the cache")
        var settled = -1
        _ = Deadline.poll(seconds: 10, interval: 0.5) {
            let now = (try? server.proxyStats().requests) ?? -1
            defer { settled = now }
            return now == settled
        }
        let requests = try server.proxyStats().requests
        XCTAssertLessThan(requests, names.count / 4, "the listed files were not fetched together: \(requests) requests")
        try server.resetProxy()
        for name in names {
            XCTAssertEqual(try sha256(mounted.path(name)), try sha256("\(published.source)/\(name)"), name)
        }
        XCTAssertEqual(try server.proxyStats().requests, 0, "a first read of a listed file made a request")
        unmount(mounted)
    }
}
