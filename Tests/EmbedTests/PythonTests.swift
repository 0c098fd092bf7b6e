import Foundation
import SharedTestSupport
import XCTest

/// The Python package in bindings/python, by its own pytest suite, against
/// this build's libencfs.so, the shared fixture and nginx serving it.
/// pytest comes from PyPI (Scripts/install-deps.sh installs it with
/// fsspec and pandas, for the python3 on PATH).
final class PythonTests: EmbedTestCase {
    func testPytestSuite() throws {
        let fixture = try EmbedFixture.shared()
        let url = try serveAppBundle()
        let base = String(url.dropLast("app.bundle".count))
        let run = try Subprocess.run("python3", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                                                 EmbedFixture.root + "/bindings/python/tests"],
                                     environment: ["ENCFS_BIN_DIR": fixture.binDirectory,
                                                   "ENCFS_LIBRARY": fixture.binDirectory + "/libencfs.so",
                                                   "ENCFS_TEST_FIXTURE": fixture.directory,
                                                   "ENCFS_TEST_URL": base,
                                                   "PYTHONDONTWRITEBYTECODE": "1"],
                                     timeout: 900)
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.contains(" passed"), run.output)
        // Every test ran: none skipped for a missing tool or server.
        XCTAssertFalse(run.output.contains("skipped"), run.output)
        XCTAssertFalse(run.output.contains("failed"), run.output)
    }
}
