import Foundation
import XCTest
import SharedTestSupport

/// Source trees, keys and the bundles `encfs-pack` made of them, built once
/// per test process with the release binaries (as an application's build
/// would) and removed when the test bundle finishes.
///
/// `app.bundle` (one raw-key slot, 4 KiB chunks) holds:
/// ```
/// docs/a.pdf        10,000 seeded random bytes, mode 0640, mtime 1600000000.123456789
/// docs/b.txt        "hello\n"
/// docs/empty        0 bytes
/// docs/sub/deep.txt "deep\n"
/// big.bin           1 MiB + 123 seeded random bytes (257 chunks)
/// f\xFF.bin         a name that is not UTF-8
/// d\xFE/inner.txt   a directory whose name is not UTF-8
/// link-a -> docs/a.pdf, link-docs -> docs, outside -> /etc/passwd, loop -> loop
/// ```
/// `multi.bundle` holds the same tree behind a passphrase slot and an
/// X25519 recipient slot; `one.bundle` holds only `one.bin` (3 chunks and a
/// bit), whose chunks sit at the start of the payload, for damage tests.
final class LibraryFixture: Sendable {
    /// Everything lives here.
    let scratch: ScratchTree
    /// The packed source tree.
    let source: [UInt8]
    /// Regular files of the tree: path relative to the root → contents.
    let files: [[UInt8]: [UInt8]]

    /// A raw key file (64 hex characters) that opens `app.bundle` and `one.bundle`.
    let keyFile: String
    /// A raw key file that opens nothing here.
    let otherKeyFile: String
    /// The passphrase of `multi.bundle`, and a file holding it.
    let passphrase = "correct horse battery staple"
    let passphraseFile: String
    /// The identity whose public key `multi.bundle` was packed to.
    let identityFile: String

    let appBundle: String
    let multiBundle: String
    let oneBundle: String
    /// The contents of `one.bin` in `one.bundle`.
    let oneFile: [UInt8]

    /// Names that are not UTF-8.
    static let nonUTF8File: [UInt8] = [0x66, 0xFF, 0x2E, 0x62, 0x69, 0x6E] // "f\xFF.bin"
    static let nonUTF8Directory: [UInt8] = [0x64, 0xFE] // "d\xFE"
    /// The modification time given to docs/a.pdf.
    static let aModification = (seconds: 1_600_000_000, nanoseconds: 123_456_789)
    static let chunkSize = 4096

    /// The fixture for this process, built on first use.
    static func shared() throws -> LibraryFixture {
        try cache.get()
    }

    private static let cache: Swift.Result<LibraryFixture, any Error> = Swift.Result {
        let fixture = try LibraryFixture()
        XCTestObservationCenter.shared.addTestObserver(Cleanup(fixture))
        return fixture
    }

    private init() throws {
        scratch = try ScratchTree()
        source = scratch.appending(Array("src".utf8))
        var generator = SeededGenerator(seed: 0x656D_6265_6400)
        var files: [[UInt8]: [UInt8]] = [:]
        files[bytes("docs/a.pdf")] = generator.bytes(10_000)
        files[bytes("docs/b.txt")] = bytes("hello\n")
        files[bytes("docs/empty")] = []
        files[bytes("docs/sub/deep.txt")] = bytes("deep\n")
        files[bytes("big.bin")] = generator.bytes((1 << 20) + 123)
        files[Self.nonUTF8File] = bytes("not utf-8\n")
        files[Self.nonUTF8Directory + bytes("/inner.txt")] = bytes("inside\n")
        self.files = files

        try scratch.makeDirectory(bytes("src"))
        for directory in ["src/docs", "src/docs/sub"] { try scratch.makeDirectory(bytes(directory)) }
        try scratch.makeDirectory(bytes("src/") + Self.nonUTF8Directory)
        for (path, contents) in files {
            try scratch.writeFile(bytes("src/") + path, contents, mode: path == bytes("docs/a.pdf") ? 0o640 : 0o644)
        }
        try scratch.setModificationTime(bytes("src/docs/a.pdf"), seconds: Self.aModification.seconds,
                                        nanoseconds: Self.aModification.nanoseconds)
        try scratch.makeSymlink(bytes("src/link-a"), target: bytes("docs/a.pdf"))
        try scratch.makeSymlink(bytes("src/link-docs"), target: bytes("docs"))
        try scratch.makeSymlink(bytes("src/outside"), target: bytes("/etc/passwd"))
        try scratch.makeSymlink(bytes("src/loop"), target: bytes("loop"))

        oneFile = generator.bytes(3 * Self.chunkSize + 500)
        try scratch.makeDirectory(bytes("one"))
        try scratch.writeFile(bytes("one/one.bin"), oneFile)

        let keygen = try Tools.binary("encfs-keygen")
        let pack = try Tools.binary("encfs-pack")
        keyFile = scratch.appending("app.key")
        otherKeyFile = scratch.appending("other.key")
        identityFile = scratch.appending("host.key")
        passphraseFile = scratch.appending("pass.txt")
        try Subprocess.check(keygen, ["--symmetric", "-o", keyFile])
        try Subprocess.check(keygen, ["--symmetric", "-o", otherKeyFile])
        try Subprocess.check(keygen, ["-o", identityFile])
        try scratch.writeFile(bytes("pass.txt"), bytes(passphrase + "\n"), mode: 0o600)

        let src = scratch.appending("src")
        appBundle = scratch.appending("app.bundle")
        multiBundle = scratch.appending("multi.bundle")
        oneBundle = scratch.appending("one.bundle")
        try Subprocess.check(pack, ["--quiet", "--chunk-size", "4K", "--key-file", keyFile, "--", src, appBundle])
        try Subprocess.check(pack, ["--quiet", "--scrypt-log-n", "14", "--passphrase-file", passphraseFile,
                              "--recipient", identityFile + ".pub", "--", src, multiBundle])
        try Subprocess.check(pack, ["--quiet", "--chunk-size", "4K", "--key-file", keyFile, "--",
                              scratch.appending("one"), oneBundle])
    }

    /// The contents of the packed file at `path` (relative, as bytes).
    func contents(_ path: String) -> [UInt8] { files[bytes(path)] ?? [] }

    /// The whole bundle file at `path`, for copies to damage in memory.
    func bundleBytes(_ path: String) throws -> [UInt8] { try ScratchTree.readFile(Array(path.utf8)) }

    /// Removes the scratch tree once every test has run.
    private final class Cleanup: NSObject, XCTestObservation, @unchecked Sendable {
        // Held only to release it (and so its ScratchTree) at the end.
        private var fixture: LibraryFixture?

        init(_ fixture: LibraryFixture) { self.fixture = fixture }

        func testBundleDidFinish(_ testBundle: Bundle) { fixture?.scratch.remove() }
    }
}

/// The UTF-8 bytes of `text`.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
