@testable import EncFSMount
import XCTest

/// The option string handed to libfuse: always ro,nosuid,nodev, whatever
/// the user adds.
final class MountSessionOptionsTests: XCTestCase {
    private func options(_ extra: [String]) -> [String] {
        MountSession.kernelOptions(bundlePath: Array("/b,1.encfs".utf8), extra: extra).split(separator: ",").map(String.init)
    }

    func testKernelOptions_AlwaysReadOnlyNoSuidNoDev() {
        let given = options([])
        for required in ["ro", "nosuid", "nodev", "default_permissions", "subtype=encfs"] {
            XCTAssertTrue(given.contains(required), "\(required) missing from \(given)")
        }
    }

    func testKernelOptions_SuidAndDevAreDroppedEvenInsideOneElement() {
        for extra in [["suid"], ["dev"], ["suid", "dev"], ["suid,dev"], ["allow_other,suid", "dev"]] {
            let given = options(extra)
            XCTAssertFalse(given.contains("suid"), "\(extra): \(given)")
            XCTAssertFalse(given.contains("dev"), "\(extra): \(given)")
            XCTAssertTrue(given.contains("nosuid") && given.contains("nodev"), "\(extra): \(given)")
        }
        XCTAssertTrue(options(["allow_other,suid"]).contains("allow_other"))
    }

    func testKernelOptions_CommaInBundlePathCannotAddAnOption() {
        let given = options([])
        XCTAssertTrue(given.contains("fsname=encfs:/b_1.encfs"), "\(given)")
        XCTAssertFalse(given.contains("1.encfs"))
    }
}
