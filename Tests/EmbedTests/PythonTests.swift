import Foundation
import XCTest

/// The Python package in bindings/python, by its own pytest suite, against
/// this build's libencfs.so, the shared fixture and the nginx serving it.
/// pytest comes from PyPI (Scripts/install-deps.sh installs it with
/// fsspec and pandas).
final class PythonTests: XCTestCase {
    func testPytestSuite() throws {
        let fixture = try EmbedFixture.shared()
        let run = try Run("/usr/bin/env", ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                                               EmbedFixture.root + "/bindings/python/tests"],
                          environment: ["ENCFS_BIN_DIR": fixture.binDirectory,
                                        "ENCFS_LIBRARY": fixture.binDirectory + "/libencfs.so",
                                        "ENCFS_TEST_FIXTURE": fixture.directory,
                                        "ENCFS_TEST_URL": fixture.baseURL,
                                        "PYTHONDONTWRITEBYTECODE": "1"],
                          directory: fixture.directory)
        XCTAssertEqual(run.status, 0, run.output)
        XCTAssertTrue(run.output.contains(" passed"), run.output)
        // Every test ran: none skipped for a missing tool or server.
        XCTAssertFalse(run.output.contains("skipped"), run.output)
        XCTAssertFalse(run.output.contains("failed"), run.output)
    }
}
