import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A source set aside (stalled, down) comes back by itself: it is probed
/// in the background when its backoff ends, and `encfs-ctl MNT status`
/// shows it healthy again without any read of the mount.
final class RemoteSourceProbeTests: RemoteTestCase {
    private func states(_ mountpoint: String) throws -> [String] {
        let status = try check(try Tools.ctl(), [mountpoint, "status", "--json"]).output
        let json = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        return (json?["sources"] as? [[String: Any]] ?? []).map { $0["state"] as? String ?? "" }
    }

    private func primaryErrors(_ mountpoint: String) throws -> Int {
        let status = try check(try Tools.ctl(), [mountpoint, "status", "--json"]).output
        let json = try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any]
        return (json?["sources"] as? [[String: Any]])?.first?["errors"] as? Int ?? -1
    }

    func testSetAsideSource_ProbedHealthyWithoutARead() throws {
        let primary = try RemoteServer(test: self, withProxy: true)
        let published = try publish(primary, ["a.bin": 1 << 20], chunkSize: "64K")
        let mirror = try RemoteServer(test: self, withProxy: false)
        try FileManager.default.copyItem(atPath: published.bundle, toPath: "\(mirror.root)/bundle.encfs")
        // The main address stalls at mount: the mirror opens the bundle
        // and the main address is set aside (--net-timeout 6: a 6 s backoff).
        try primary.setFault("stall")
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: published.key,
                                      ["--mirror", mirror.url("bundle.encfs"), "--net-timeout", "6"])
        XCTAssertEqual(try states(mounted.mountpoint), ["set-aside", "healthy"])
        try primary.setFault("pass")
        // No read from here on: only the probe can bring it back. A hang
        // guard, not a timing assertion (backoffs double up to 60 s).
        var seen = try states(mounted.mountpoint)
        let deadline = Date().addingTimeInterval(90)
        while seen.first != "healthy", Date() < deadline {
            usleep(250_000)
            seen = try states(mounted.mountpoint)
        }
        XCTAssertEqual(seen, ["healthy", "healthy"])
        // And it serves: with the mirror gone, reads come from it.
        mirror.stopNginx()
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        unmount(mounted)
    }

    /// While a set-aside source's probe runs (its backoff over, the
    /// source still stalled), reads go to the mirror only: none waits out
    /// its share of the deadline on the stalled source beside the probe.
    /// The primary's log must show the probes' requests (the bundle's
    /// last fetch unit) and nothing else while c.bin is read slowly through
    /// two probes (the first may come before the backoff of later
    /// failures ends; the second comes when it ends, when reads used to
    /// try the source too).
    func testProbeRunning_ReadsLeaveTheSourceToIt() throws {
        let primary = try RemoteServer(test: self, withProxy: true)
        let published = try publish(primary, ["a.bin": 1 << 20, "c.bin": 48 << 20], chunkSize: "64K")
        let mirror = try RemoteServer(test: self, withProxy: false)
        try FileManager.default.copyItem(atPath: published.bundle, toPath: "\(mirror.root)/bundle.encfs")
        let size = try FileManager.default.attributesOfItem(atPath: published.bundle)[.size] as? Int ?? 0
        let probeRange = "bytes=\(size - (64 << 10))-\(size - 1)"
        // --net-timeout 3: backoffs of 3, 6, 12… s; a probe of a stalled
        // source ends after about a second (a third of the deadline).
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: published.key,
                                      ["--mirror", mirror.url("bundle.encfs"), "--net-timeout", "3", "--fetch-size", "64K"])
        // No body byte at all: a probe stalls too.
        try primary.setFault("stall", ["after": "0"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        XCTAssertEqual(try states(mounted.mountpoint).first, "set-aside")
        let before = try primary.accessLog().count
        func since() throws -> [RemoteServer.AccessLogLine] { Array(try primary.accessLog().dropFirst(before)) }
        // 64 KiB every 50 ms: units are fetched all the time. The loop
        // ends after two probes (a hang guard, not a timing assertion).
        let fd = open(mounted.path("c.bin"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var piece = [UInt8](repeating: 0, count: 64 << 10)
        var offset = 0
        let deadline = Date().addingTimeInterval(90)
        while try since().filter({ $0.range == probeRange }).count < 2, Date() < deadline, offset < 48 << 20 {
            XCTAssertEqual(Glibc.pread(fd, &piece, piece.count, off_t(offset)), piece.count)
            offset += piece.count
            usleep(50_000)
        }
        close(fd)
        let seen = try since()
        XCTAssertGreaterThanOrEqual(seen.filter { $0.range == probeRange }.count, 2, "two probes of the set-aside source")
        XCTAssertEqual(seen.filter { $0.range != probeRange }.map(\.range), [], "reads went to the source while its probe ran")
        unmount(mounted)
    }

    /// A source that answers small requests but stalls long bodies stays
    /// set aside after its probe: the probe asks for a whole fetch unit.
    /// A 16-byte probe passed it, brought it back, and the next read
    /// waited out its share of the deadline there again.
    func testSourceStallingLongBodies_StaysSetAsideAfterItsProbe() throws {
        let primary = try RemoteServer(test: self, withProxy: true)
        let published = try publish(primary, ["a.bin": 1 << 20], chunkSize: "64K")
        let mirror = try RemoteServer(test: self, withProxy: false)
        try FileManager.default.copyItem(atPath: published.bundle, toPath: "\(mirror.root)/bundle.encfs")
        // --net-timeout 3: probed 3 s after a failure; a stalled request
        // ends after about a second (a third of the deadline).
        let mounted = try mountRemote(primary.url("bundle.encfs"), key: published.key,
                                      ["--mirror", mirror.url("bundle.encfs"), "--net-timeout", "3", "--fetch-size", "64K"])
        defer { unmount(mounted) }
        // Bodies stall after 1,000 bytes: the read's first request (64
        // KiB) stalls, the mirror answers, the primary is set aside.
        try primary.setFault("stall", ["after": "1000"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        XCTAssertEqual(try states(mounted.mountpoint), ["set-aside", "healthy"])
        // No read from here on. Wait for the probe (a request for bytes
        // that end the bundle), then for its outcome: an error, or the
        // source back (hang guards, not timing assertions).
        let size = try FileManager.default.attributesOfItem(atPath: published.bundle)[.size] as? Int ?? 0
        let deadline = Date().addingTimeInterval(60)
        while try !primary.accessLog().contains(where: { $0.range.hasSuffix("-\(size - 1)") }), Date() < deadline {
            usleep(100_000)
        }
        let errors = try primaryErrors(mounted.mountpoint)
        while try primaryErrors(mounted.mountpoint) == errors, try states(mounted.mountpoint).first == "set-aside", Date() < deadline {
            usleep(100_000)
        }
        XCTAssertEqual(try states(mounted.mountpoint), ["set-aside", "healthy"], "a probe brought back a source that stalls long bodies")
        XCTAssertEqual(try primaryErrors(mounted.mountpoint), errors + 1, "the probe's failure is the source's next error")
    }
}
