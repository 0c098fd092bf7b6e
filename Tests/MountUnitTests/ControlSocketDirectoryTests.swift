import EncFSCore
import Foundation
@testable import EncFSMount
@testable import EncFSService
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The control-socket directory a daemon accepts: a 0700 directory of its
/// own user, created when missing; one others may enter or another user
/// owns is refused (someone could swap the socket). Checked on scratch
/// directories, never on /run/encfs, which other mounts use meanwhile.
final class ControlSocketDirectoryTests: XCTestCase {
    private var parent = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        parent = try TemporaryDirectory.make(prefix: "encfs-control-directory")
        let removed = parent
        addTeardownBlock { _ = try? FileManager.default.removeItem(atPath: removed) }
    }

    /// The operation text of the refusal, or nil when accepted.
    private func refusal(_ directory: String) -> String? {
        do {
            try ControlSocket.prepareDirectory(Array(directory.utf8))
            return nil
        } catch let BundleError.io(errno: code, operation: operation, path: _) {
            XCTAssertEqual(code, EPERM, operation)
            return operation
        } catch {
            return "\(error)"
        }
    }

    func testMissing_IsCreated0700() {
        let directory = "\(parent)/encfs"
        XCTAssertNil(refusal(directory))
        var st = stat()
        XCTAssertEqual(lstat(directory, &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o700)
    }

    func testOpenedUp_IsRefused() {
        let directory = "\(parent)/encfs"
        XCTAssertNil(refusal(directory))
        for mode: mode_t in [0o711, 0o750, 0o701] {
            XCTAssertEqual(chmod(directory, mode), 0)
            XCTAssertEqual(refusal(directory), "use control socket directory (it must be a 0700 directory of this user)",
                           String(mode, radix: 8))
        }
    }

    func testOtherUsersDirectory_IsRefused() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to give the directory away")
        let directory = "\(parent)/encfs"
        XCTAssertNil(refusal(directory))
        XCTAssertEqual(chown(directory, 65534, 65534), 0)
        XCTAssertEqual(refusal(directory), "use control socket directory (it must be a 0700 directory of this user)")
    }

    func testSymlinkToADirectory_IsRefused() {
        let real = "\(parent)/real"
        XCTAssertEqual(mkdir(real, 0o700), 0)
        XCTAssertEqual(symlink(real, "\(parent)/encfs"), 0)
        XCTAssertEqual(refusal("\(parent)/encfs"), "use control socket directory (it must be a 0700 directory of this user)")
    }
}
