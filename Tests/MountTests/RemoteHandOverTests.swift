import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The pipe encfs-mount hands a remote bundle's address, headers and
/// credentials over to its daemon through: the daemon reads it at fd 5
/// and holds neither end of it at any other number.
final class RemoteHandOverTests: RemoteTestCase {
    /// The pipe inodes (`pipe:[N]`) `pid` has open without close-on-exec,
    /// by descriptor.
    private func inheritablePipes(of pid: pid_t) -> [Int32: String] {
        var out: [Int32: String] = [:]
        for (fd, target) in ProcessTable.descriptors(of: pid) where target.hasPrefix("pipe:") {
            let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            let flags = info.split(separator: "\n").first { $0.hasPrefix("flags:") }
                .flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) } ?? 0
            if flags & Int(O_CLOEXEC) == 0 { out[fd] = target }
        }
        return out
    }

    func testDaemon_HoldsNoCopyOfTheHandOverPipe() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["a.bin": 200_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key)
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        let pid = try XCTUnwrap(mounted.daemonPID)
        // Pipes this test process holds too came from it (a harness's),
        // not from encfs-mount.
        let ours = Set(ProcessTable.descriptors(of: getpid()).map(\.target))
        let leaked = inheritablePipes(of: pid).filter { !ours.contains($0.value) && $0.key > 2 }
        XCTAssertEqual(leaked, [:], "the daemon holds a pipe of encfs-mount's that a program it starts would inherit")
        unmount(mounted)
    }
}
