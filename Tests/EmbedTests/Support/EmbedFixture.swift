import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What the C and Python tests of libencfs share, made once per test
/// process: the bundles of Tests/EmbedTests/Fixture/make_fixture.py and the
/// pkg-config file beside libencfs.so (Scripts/make-pkgconfig.sh). Removed
/// when the test bundle finishes. Each test that reads over HTTP starts its
/// own nginx (``EmbedTestCase/serveAppBundle()``).
final class EmbedFixture: @unchecked Sendable {
    /// The fixture's directory (see make_fixture.py for what it holds).
    let directory: String
    /// The release build: encfs-pack, encfs-keygen, libencfs.so.
    let binDirectory: String
    /// Where encfs.pc is.
    var pkgConfigPath: String { binDirectory + "/pkgconfig" }

    static var root: String { Tools.repositoryRoot }

    static func shared() throws -> EmbedFixture { try cache.get() }

    private static let cache: Swift.Result<EmbedFixture, any Error> = Swift.Result {
        let fixture = try EmbedFixture()
        XCTestObservationCenter.shared.addTestObserver(Cleanup(fixture))
        return fixture
    }

    private init() throws {
        binDirectory = (try Tools.pack() as NSString).deletingLastPathComponent
        _ = try Tools.keygen()
        guard access(binDirectory + "/libencfs.so", R_OK) == 0 else {
            throw SubprocessError("no libencfs.so in \(binDirectory): \(BuiltBinaries.remedy)")
        }
        directory = try TemporaryDirectory.make(prefix: "encfs-embed-tests.")
        // The python3 on PATH: the one Scripts/install-deps.sh gives pytest.
        try Subprocess.check("python3", [Self.root + "/Tests/EmbedTests/Fixture/make_fixture.py", directory, binDirectory])
        try Subprocess.check("/bin/bash", [Self.root + "/Scripts/make-pkgconfig.sh"], environment: ["ENCFS_BIN_DIR": binDirectory])
        try BadSignatureBundle.make(from: directory + "/app.bundle", keyFile: directory + "/app.key", to: directory + "/badsig.bundle")
    }

    /// The path of `name` in the fixture.
    func path(_ name: String) -> String { directory + "/" + name }

    private final class Cleanup: NSObject, XCTestObservation, @unchecked Sendable {
        private let fixture: EmbedFixture
        init(_ fixture: EmbedFixture) { self.fixture = fixture }

        func testBundleDidFinish(_ testBundle: Bundle) {
            TemporaryDirectory.removeTree(Array(fixture.directory.utf8))
        }
    }
}

/// The base of EmbedTests' classes: the shared fixture, and nginx serving
/// its app.bundle for one test.
class EmbedTestCase: ToolTestCase {
    /// nginx on 127.0.0.1 serving a copy of the fixture's app.bundle,
    /// stopped by this test's teardown; its address.
    func serveAppBundle() throws -> String {
        let fixture = try EmbedFixture.shared()
        let server = try RemoteServer(test: self, withProxy: false)
        try FileManager.default.copyItem(atPath: fixture.path("app.bundle"), toPath: server.root + "/app.bundle")
        return server.url("app.bundle")
    }
}
