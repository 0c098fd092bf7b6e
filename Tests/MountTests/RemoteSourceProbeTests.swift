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
}
