import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A source set aside keeps nothing running: the transfers still stalled
/// there when it is set aside end at once (their sockets are shut down),
/// not at libcurl's next progress call, about a second later while no data
/// flows, or at the end of their own share of the deadline. Until then each
/// held a read-ahead thread the mirror's requests waited for
/// (docs/PERFORMANCE.md, "A fleet").
final class RemoteFailoverCutTests: RemoteTestCase {
    /// Two reads stall at the primary (behind the fault proxy), the second
    /// started ``laterStart`` after the first; the first's failure sets
    /// the primary aside. Both reads are answered by the mirror, and the
    /// proxy sees every stalled connection closed together: within
    /// ``together``, where without the cut the second read's connections
    /// stay open until its own deadline share or progress call, about
    /// ``laterStart`` after the first's.
    func testStalledTransfersEndWhenTheSourceIsSetAside() throws {
        // Eight connections: no request waits for a free one.
        try twoStalledReads(["--connections", "8"]) { primary in
            // Both reads' transfers stalled (at least one each) and all ended.
            let stalls = try primary.proxyStalls()
            XCTAssertGreaterThanOrEqual(stalls.ends.count, 2, "\(stalls)")
            XCTAssertEqual(stalls.open, 0, "a stalled transfer still runs at the set-aside source: \(stalls)")
            let spread = (stalls.ends.max() ?? 0) - (stalls.ends.min() ?? 0)
            XCTAssertLessThan(spread, Self.together, "the later read's stalled transfers outlived the failover: \(stalls.ends)")
        }
    }

    /// A request that waited for a connection of a source while another
    /// request's failure set it aside is not sent there: it goes to the
    /// mirror. With one connection, the second read waits for the one the
    /// first read's stalled request holds; when that fails (its stall
    /// window), the primary has seen one request, not two. (Two things
    /// keep it so: the request checks, once it has the connection, whether
    /// the source was set aside since it was chosen; and the abandon flag
    /// the set-aside raised ends a transfer at its first progress call.)
    func testRequestWaitingForAConnection_NotSentOnceTheSourceIsSetAside() throws {
        try twoStalledReads(["--connections", "1", "--fetch-size", "64K"]) { primary in
            XCTAssertEqual(try primary.proxyStats().requests, 1, "the waiting request was sent to the set-aside source")
        }
    }

    /// Mounts the primary (behind the fault proxy) with a mirror,
    /// `--net-timeout 4` and `options`; makes the primary stall every body
    /// after 1,000 bytes; reads 4 KiB of a.bin and, ``laterStart`` after
    /// that read stalled, of b.bin (``twoReads``), both of which must come
    /// back right (from the mirror); then runs `check` on the primary,
    /// still mounted.
    private func twoStalledReads(_ options: [String], _ check: (RemoteServer) throws -> Void) throws {
        let primary = try RemoteServer(test: self, withProxy: true)
        let published = try publish(primary, ["a.bin": 1 << 20, "b.bin": 1 << 20], chunkSize: "64K")
        let mirror = try RemoteServer(test: self, withProxy: false)
        try FileManager.default.copyItem(atPath: published.bundle, toPath: "\(mirror.root)/bundle.encfs")
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: published.key,
                                      ["--mirror", mirror.url("bundle.encfs"), "--net-timeout", "4"] + options)
        defer { unmount(mounted) }
        let offset = 300_000
        let expectedPieces = try ["a.bin", "b.bin"].map { try expected("\(published.source)/\($0)", offset: offset) }
        try primary.resetProxy()
        try primary.setFault("stall", ["after": "1000"])
        guard let proxyPort = primary.proxyPort else { return XCTFail("no proxy") }
        let read = try python(Self.twoReads, [String(proxyPort), String(offset), mounted.path("a.bin"), mounted.path("b.bin"),
                                              String(Self.laterStart)], timeout: 60)
        XCTAssertEqual(read.output.split(separator: "\n").map(String.init), expectedPieces, "\(read.summary)")
        try check(primary)
        try primary.setFault("pass")
    }

    /// Reads 4 KiB at argv[2] of argv[3], and of argv[4] once the proxy
    /// at port argv[1] holds a stalled connection and argv[5] seconds
    /// more passed; prints each piece's SHA-256 (or the errno), in order.
    private static let twoReads = """
        import hashlib, json, os, sys, threading, time, urllib.request
        digests = {}
        def piece(path):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            try:
                digests[path] = hashlib.sha256(os.pread(fd, 4096, int(sys.argv[2]))).hexdigest()
            except OSError as e:
                digests[path] = "errno %d" % e.errno
            os.close(fd)
        def stalled():
            url = "http://127.0.0.1:%s/__proxy/stats" % sys.argv[1]
            return json.loads(urllib.request.urlopen(url, timeout=10).read())["stalled"]
        first = threading.Thread(target=piece, args=(sys.argv[3],))
        first.start()
        # The second read starts once the first stalls, a while later.
        deadline = time.monotonic() + 10
        while stalled() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(float(sys.argv[5]))
        second = threading.Thread(target=piece, args=(sys.argv[4],))
        second.start()
        first.join()
        second.join()
        print("\\n".join(digests.get(path, "failed") for path in sys.argv[3:5]))
        """

    /// Seconds between the two reads' start: the later read's transfers
    /// would end about this long after the first's without the cut.
    private static let laterStart = 0.6
    /// The bound on the spread of the stalled connections' ends (seconds):
    /// the cut closes them within milliseconds (over 10 times less), and
    /// it stays well under ``laterStart``.
    private static let together = 0.25
}
