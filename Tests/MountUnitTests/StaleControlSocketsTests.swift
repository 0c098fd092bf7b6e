import EncFSCore
import Foundation
@testable import EncFSMount
@testable import EncFSService
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The sweep of a control-socket directory removes exactly the sockets
/// nobody listens on, under the daemon's names, never through a symlink.
final class StaleControlSocketsTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try TemporaryDirectory.make(prefix: "encfs-stale-sockets")
        let removed = directory
        addTeardownBlock { _ = try? FileManager.default.removeItem(atPath: removed) }
    }

    private func path(_ name: String) -> String { "\(directory)/\(name)" }

    private func exists(_ name: String) -> Bool {
        var st = stat()
        return lstat(path(name), &st) == 0
    }

    /// A socket file at `name` whose listener is closed: what a killed
    /// daemon leaves.
    private func makeStaleSocket(_ name: String) throws {
        _ = try ControlSocket.listen(at: Array(path(name).utf8))
    }

    func testSweep_RemovesOnlyRefusingSocketsWithTheDaemonsNames() throws {
        let stale = String(repeating: "a1", count: 16) + ".sock"
        let live = String(repeating: "b2", count: 16) + ".sock"
        let plainFile = String(repeating: "c3", count: 16) + ".sock"
        let link = String(repeating: "d4", count: 16) + ".sock"
        let otherName = "notours.sock"
        try makeStaleSocket(stale)
        try makeStaleSocket(otherName)
        let listener = try ControlSocket.listen(at: Array(path(live).utf8))
        XCTAssertTrue(FileManager.default.createFile(atPath: path(plainFile), contents: Data()))
        XCTAssertEqual(symlink(path(otherName), path(link)), 0)

        XCTAssertEqual(StaleControlSockets.sweep(Array(directory.utf8)), 1)

        XCTAssertFalse(exists(stale), "the stale socket is still there")
        XCTAssertTrue(exists(live), "a listening socket was removed")
        XCTAssertNoThrow(try ControlSocket.connect(to: Array(path(live).utf8)))
        XCTAssertTrue(exists(plainFile), "a file that is not a socket was removed")
        XCTAssertTrue(exists(link), "a symlink was removed")
        XCTAssertTrue(exists(otherName), "a socket under another name was removed")
        withExtendedLifetime(listener) {}
    }

    func testSweep_EmptyOrMissingDirectory_RemovesNothing() {
        XCTAssertEqual(StaleControlSockets.sweep(Array(directory.utf8)), 0)
        XCTAssertEqual(StaleControlSockets.sweep(Array("\(directory)/missing".utf8)), 0)
    }

    func testSocketNames() {
        XCTAssertTrue(StaleControlSockets.isSocketName(Array((String(repeating: "0f", count: 16) + ".sock").utf8)))
        for name in [String(repeating: "0F", count: 16) + ".sock", String(repeating: "0f", count: 15) + ".sock",
                     String(repeating: "0f", count: 16) + ".socket", String(repeating: "0g", count: 16) + ".sock", ".sock"] {
            XCTAssertFalse(StaleControlSockets.isSocketName(Array(name.utf8)), name)
        }
    }
}
