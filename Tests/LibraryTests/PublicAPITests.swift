import Foundation
import SharedTestSupport
import XCTest

/// The public surface is a decision (docs/ARCHITECTURE.md, "The public
/// surface"): every public declaration an application reaches through
/// `import EncFS` is listed in docs/PublicAPI.txt, and a build that exports
/// anything else, or no longer exports something listed, fails here; so
/// does one against which examples/embed and `CountingSource` (an
/// application's own `ByteSource`) no longer build as a module outside
/// this package, with the upcoming `MemberImportVisibility` on.
final class PublicAPITests: XCTestCase {
    func testPublicAPI_IsTheCheckedInList() throws {
        // The directory of the built binaries, checked to be fresh.
        let directory = (try Tools.binary("encfs-embed-example") as NSString).deletingLastPathComponent
        let result = try Subprocess.run("\(Tools.repositoryRoot)/Scripts/public-api.sh", ["--check", directory])
        XCTAssertEqual(result.status, 0, """
            the public symbols of the release build in \(directory) differ from \
            docs/PublicAPI.txt:
            \(result.output)\(result.errorOutput)
            """)
    }
}
