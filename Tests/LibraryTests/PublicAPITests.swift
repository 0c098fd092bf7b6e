import Foundation
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
        // #filePath = <root>/Tests/LibraryTests/PublicAPITests.swift
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let result = try Tool.run("\(root)/Scripts/public-api.sh", ["--check", Tool.binaryDirectory])
        XCTAssertEqual(result.status, 0, """
            the public symbols of the release build in \(Tool.binaryDirectory) differ from \
            docs/PublicAPI.txt:
            \(result.output)\(result.stderr)
            """)
    }
}
