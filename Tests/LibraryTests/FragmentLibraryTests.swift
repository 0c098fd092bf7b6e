import EncFS
import Foundation
import XCTest
import SharedTestSupport

/// The public API over a bundle whose small files lie in fragments
/// (`encfs-pack --compress zstd`): every file's contents, and reads at
/// offsets inside and past the end of a slice, equal the source's.
final class FragmentLibraryTests: XCTestCase {
    func testContentsAndReads_SmallFilesInFragments() throws {
        let fixture = try LibraryFixture.shared()
        let bundlePath = fixture.scratch.appending("fragments.bundle")
        let source = String(decoding: fixture.source, as: UTF8.self)
        try Subprocess.check(try Tools.binary("encfs-pack"), ["--quiet", "--compress", "zstd", "--chunk-size", "4K", "--json",
                                                             "--key-file", fixture.keyFile, "--", source, bundlePath])
        let bundle = try EncryptedBundle(path: bundlePath, unlock: .keyFile(fixture.keyFile))
        for (path, expected) in fixture.files {
            XCTAssertEqual(Array(try bundle.contents(atBytePath: path, limit: 2 << 20)), expected,
                           String(decoding: path, as: UTF8.self))
        }
        let file = try bundle.openFile(atPath: "docs/b.txt")
        XCTAssertEqual(Array(try file.read(upToCount: 3, atOffset: 2)), bytes("llo"))
        XCTAssertEqual(Array(try file.read(upToCount: 100, atOffset: 4)), bytes("o\n"), "short only at the end of the slice")
        XCTAssertEqual(try file.read(upToCount: 100, atOffset: 6), Data(), "nothing past the slice")
    }
}
