import Foundation
import SharedTestSupport
import XCTest

/// The program in examples/embed, built by `swift build -c release` as
/// `encfs-embed-example`: it reads a bundle through the public API alone,
/// and neither links nor loads libfuse.
final class EmbedExampleTests: XCTestCase {
    func testExample_ListsEveryItemOfTheBundle() throws {
        let fixture = try LibraryFixture.shared()
        let result = try Subprocess.check(try Tools.binary("encfs-embed-example"), [fixture.appBundle, fixture.keyFile])
        XCTAssertEqual(result.output.split(separator: "\n").map(String.init), [
            "f 1048699 big.bin",
            "d docs/",
            "f 10000 docs/a.pdf",
            "f 6 docs/b.txt",
            "f 0 docs/empty",
            "d docs/sub/",
            "f 5 docs/sub/deep.txt",
            "d d\u{FFFD}/",
            "f 7 d\u{FFFD}/inner.txt",
            "f 10 f\u{FFFD}.bin",
            "l link-a -> docs/a.pdf",
            "l link-docs -> docs",
            "l loop -> loop",
            "l outside -> /etc/passwd",
        ])
    }

    func testExample_WritesOneFileByteForByte() throws {
        let fixture = try LibraryFixture.shared()
        let example = try Tools.binary("encfs-embed-example")
        for path in ["docs/a.pdf", "big.bin", "docs/empty", "link-a"] {
            let result = try Subprocess.check(example, [fixture.appBundle, fixture.keyFile, path])
            let expected = fixture.contents(path == "link-a" ? "docs/a.pdf" : path)
            XCTAssertEqual(result.stdout, expected, path)
        }
    }

    func testExample_WrongKeyAndMissingFileExitOne() throws {
        let fixture = try LibraryFixture.shared()
        let example = try Tools.binary("encfs-embed-example")
        let wrong = try Subprocess.run(example, [fixture.appBundle, fixture.otherKeyFile])
        XCTAssertEqual(wrong.status, 1)
        XCTAssertEqual(wrong.errorOutput, "encfs-embed-example: error: this key does not open the bundle (it has raw-key slots)\n")
        let missing = try Subprocess.run(example, [fixture.appBundle, fixture.keyFile, "docs/nope"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.errorOutput, "encfs-embed-example: error: no such file in the bundle: docs/nope\n")
        XCTAssertEqual(try Subprocess.run(example, [fixture.appBundle]).status, 2)
    }

    func testExample_LinksNoLibfuse() throws {
        let example = try Tools.binary("encfs-embed-example")
        let ldd = try Subprocess.check("/usr/bin/ldd", [example])
        // libcrypto shows that ldd did list the libraries.
        XCTAssertTrue(ldd.output.contains("libcrypto"), ldd.output)
        XCTAssertFalse(ldd.output.contains("libfuse"), ldd.output)
    }
}
