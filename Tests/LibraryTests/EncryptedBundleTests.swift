import EncFS
import Foundation
import XCTest

/// Every call of the public API on a bundle packed by the release
/// `encfs-pack`, compared with the source tree it was packed from.
final class EncryptedBundleTests: XCTestCase {
    private func open() throws -> (EncryptedBundle, LibraryFixture) {
        let fixture = try LibraryFixture.shared()
        return (try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.keyFile)), fixture)
    }

    // MARK: - Directories

    func testContentsOfDirectory_RootListsEveryNameSorted() throws {
        let (bundle, _) = try open()
        let expected = ["big.bin", "docs", "d\u{FFFD}", "f\u{FFFD}.bin", "link-a", "link-docs", "loop", "outside"]
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: ""), expected)
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "/"), expected)
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "."), expected)
    }

    func testContentsOfDirectory_Subdirectory() throws {
        let (bundle, _) = try open()
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "docs"), ["a.pdf", "b.txt", "empty", "sub"])
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "/docs/sub/"), ["deep.txt"])
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "docs/sub/.."), ["a.pdf", "b.txt", "empty", "sub"])
    }

    func testContentsOfDirectory_FollowsSymlinkToDirectory() throws {
        let (bundle, _) = try open()
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "link-docs"), ["a.pdf", "b.txt", "empty", "sub"])
    }

    func testSubpathsOfDirectory_ListsTreeInPreOrder() throws {
        let (bundle, _) = try open()
        XCTAssertEqual(try bundle.subpathsOfDirectory(atPath: "docs"),
                       ["a.pdf", "b.txt", "empty", "sub", "sub/deep.txt"])
        let all = try bundle.subpathsOfDirectory(atBytePath: [])
        XCTAssertEqual(all.count, 14)
        XCTAssertEqual(all.first, bytes("big.bin"))
        // A directory's contents follow it directly.
        let docs = try XCTUnwrap(all.firstIndex(of: bytes("docs")))
        XCTAssertEqual(all[docs + 1], bytes("docs/a.pdf"))
        XCTAssertTrue(all.contains(LibraryFixture.nonUTF8Directory + bytes("/inner.txt")))
        // Symlinks to directories are listed, not descended into.
        XCTAssertFalse(all.contains(bytes("link-docs/a.pdf")))
    }

    // MARK: - Attributes

    func testAttributesOfItem_File() throws {
        let (bundle, _) = try open()
        let item = try bundle.attributesOfItem(atPath: "docs/a.pdf")
        XCTAssertEqual(item.kind, .regularFile)
        XCTAssertTrue(item.isRegularFile)
        XCTAssertEqual(item.size, 10_000)
        XCTAssertEqual(item.permissions, 0o640)
        XCTAssertNil(item.symbolicLinkTarget)
        let expected = Double(LibraryFixture.aModification.seconds) + Double(LibraryFixture.aModification.nanoseconds) / 1e9
        XCTAssertEqual(item.modificationDate.timeIntervalSince1970, expected, accuracy: 1e-6)
    }

    func testAttributesOfItem_DirectoryAndSymlinkNotFollowed() throws {
        let (bundle, _) = try open()
        let directory = try bundle.attributesOfItem(atPath: "docs")
        XCTAssertEqual(directory.kind, .directory)
        XCTAssertEqual(directory.size, 0)
        XCTAssertEqual(directory.permissions, 0o755)
        let root = try bundle.attributesOfItem(atPath: "")
        XCTAssertTrue(root.isDirectory)

        let link = try bundle.attributesOfItem(atPath: "link-a")
        XCTAssertEqual(link.kind, .symbolicLink)
        XCTAssertEqual(link.symbolicLinkTarget, "docs/a.pdf")
        XCTAssertEqual(link.symbolicLinkTargetBytes, bytes("docs/a.pdf"))
        XCTAssertEqual(link.size, UInt64("docs/a.pdf".utf8.count))
        // Symlinks before the last component are followed.
        XCTAssertEqual(try bundle.attributesOfItem(atPath: "link-docs/a.pdf").size, 10_000)
    }

    // MARK: - Contents

    func testContents_EqualsSourceForEveryFile() throws {
        let (bundle, fixture) = try open()
        for (path, expected) in fixture.files {
            XCTAssertEqual(Array(try bundle.contents(atBytePath: path, limit: 2 << 20)), expected,
                           String(decoding: path, as: UTF8.self))
        }
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/b.txt")), bytes("hello\n"))
        XCTAssertEqual(try bundle.contents(atPath: "docs/empty"), Data())
    }

    func testContents_FollowsSymlink() throws {
        let (bundle, fixture) = try open()
        XCTAssertEqual(Array(try bundle.contents(atPath: "link-a")), fixture.contents("docs/a.pdf"))
        XCTAssertEqual(Array(try bundle.contents(atPath: "link-docs/sub/deep.txt")), bytes("deep\n"))
    }

    func testContents_RefusesFileAboveLimit() throws {
        let (bundle, fixture) = try open()
        let size = UInt64(fixture.contents("big.bin").count)
        XCTAssertThrowsError(try bundle.contents(atPath: "big.bin", limit: 1 << 20)) { error in
            XCTAssertEqual(error as? EncryptedBundleError, .tooLarge(path: bytes("big.bin"), size: size, limit: 1 << 20))
        }
        // Exactly at the limit is allowed.
        XCTAssertEqual(Array(try bundle.contents(atPath: "big.bin", limit: Int(size))), fixture.contents("big.bin"))
        XCTAssertThrowsError(try bundle.contents(atPath: "docs/b.txt", limit: 5))
        XCTAssertEqual(try bundle.contents(atPath: "docs/empty", limit: 0), Data())
        XCTAssertThrowsError(try bundle.contents(atPath: "docs/b.txt", limit: -1))
    }

    // MARK: - Open files

    func testOpenFile_ReadUpToCountInsideAndAcrossChunks() throws {
        let (bundle, fixture) = try open()
        let source = fixture.contents("big.bin")
        let file = try bundle.openFile(atPath: "big.bin")
        XCTAssertEqual(file.size, UInt64(source.count))
        XCTAssertEqual(file.path, "big.bin")
        let chunk = LibraryFixture.chunkSize
        for (offset, count) in [(0, 1), (0, chunk), (chunk - 1, 2), (chunk, chunk), (3 * chunk + 17, 5 * chunk + 3), (100_000, 1 << 16)] {
            let part = try file.read(upToCount: count, atOffset: UInt64(offset))
            XCTAssertEqual(Array(part), Array(source[offset..<(offset + count)]), "offset \(offset) count \(count)")
        }
    }

    func testOpenFile_ReadIsShortOnlyAtEndOfFile() throws {
        let (bundle, fixture) = try open()
        let source = fixture.contents("big.bin")
        let file = try bundle.openFile(atPath: "big.bin")
        let tail = try file.read(upToCount: 4096, atOffset: UInt64(source.count - 10))
        XCTAssertEqual(Array(tail), Array(source.suffix(10)))
        XCTAssertEqual(Array(try file.read(upToCount: Int.max, atOffset: 0)), source)
    }

    func testOpenFile_ReadIsEmptyAtAndPastEndOfFile() throws {
        let (bundle, fixture) = try open()
        let size = UInt64(fixture.contents("big.bin").count)
        let file = try bundle.openFile(atPath: "big.bin")
        XCTAssertEqual(try file.read(upToCount: 4096, atOffset: size), Data())
        XCTAssertEqual(try file.read(upToCount: 4096, atOffset: size + 1), Data())
        XCTAssertEqual(try file.read(upToCount: 4096, atOffset: 1 << 30), Data())
        XCTAssertEqual(try file.read(upToCount: 4096, atOffset: .max), Data())
        XCTAssertEqual(try file.read(upToCount: 0, atOffset: 0), Data())
        XCTAssertEqual(try file.read(upToCount: -1, atOffset: 0), Data())
        let empty = try bundle.openFile(atPath: "docs/empty")
        XCTAssertEqual(empty.size, 0)
        XCTAssertEqual(try empty.read(upToCount: 1, atOffset: 0), Data())
    }

    func testOpenFile_ReadIntoCallerBuffer() throws {
        let (bundle, fixture) = try open()
        let source = fixture.contents("big.bin")
        let file = try bundle.openFile(atPath: "big.bin")
        var buffer = [UInt8](repeating: 0, count: 3 * LibraryFixture.chunkSize + 7)
        let n = try buffer.withUnsafeMutableBytes { try file.read(into: $0, atOffset: 1000) }
        XCTAssertEqual(n, buffer.count)
        XCTAssertEqual(buffer, Array(source[1000..<(1000 + buffer.count)]))

        let nearEnd = UInt64(source.count - 100)
        let m = try buffer.withUnsafeMutableBytes { try file.read(into: $0, atOffset: nearEnd) }
        XCTAssertEqual(m, 100)
        XCTAssertEqual(Array(buffer.prefix(100)), Array(source.suffix(100)))
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try file.read(into: $0, atOffset: UInt64(source.count)) }, 0)
        XCTAssertEqual(try file.read(into: UnsafeMutableRawBufferPointer(start: nil, count: 0), atOffset: 0), 0)
    }

    func testOpenFile_ThroughSymlink() throws {
        let (bundle, fixture) = try open()
        let file = try bundle.openFile(atPath: "link-a")
        XCTAssertEqual(file.size, 10_000)
        XCTAssertEqual(Array(try file.read(upToCount: 10_000, atOffset: 0)), fixture.contents("docs/a.pdf"))
    }

    // MARK: - Byte paths

    func testBytePath_NonUTF8NamesStayReachable() throws {
        let (bundle, fixture) = try open()
        let file = LibraryFixture.nonUTF8File
        let directory = LibraryFixture.nonUTF8Directory
        let root = try bundle.contentsOfDirectory(atBytePath: [])
        XCTAssertTrue(root.contains(file))
        XCTAssertTrue(root.contains(directory))
        XCTAssertEqual(root, root.sorted { $0.lexicographicallyPrecedes($1) })

        XCTAssertEqual(Array(try bundle.contents(atBytePath: file)), fixture.files[file])
        XCTAssertEqual(try bundle.attributesOfItem(atBytePath: file).size, UInt64(bytes("not utf-8\n").count))
        let opened = try bundle.openFile(atBytePath: file)
        XCTAssertEqual(opened.bytePath, file)
        XCTAssertEqual(Array(try opened.read(upToCount: 3, atOffset: 4)), bytes("utf"))
        XCTAssertEqual(try bundle.contentsOfDirectory(atBytePath: directory), [bytes("inner.txt")])
        XCTAssertEqual(Array(try bundle.contents(atBytePath: directory + bytes("/inner.txt"))), bytes("inside\n"))

        // The String API shows the name with U+FFFD, which names no file.
        XCTAssertThrowsError(try bundle.contents(atPath: "f\u{FFFD}.bin")) { error in
            XCTAssertEqual(error as? EncryptedBundleError, .noSuchFile(path: bytes("f\u{FFFD}.bin")))
        }
    }

    // MARK: - Sources

    func testMemoryByteSource_ReadsLikeTheFile() throws {
        let fixture = try LibraryFixture.shared()
        let memory = MemoryByteSource(bytes: try fixture.bundleBytes(fixture.appBundle), name: "app.bundle in memory")
        let bundle = try EncryptedBundle(source: memory, unlock: .keyFile(fixture.keyFile))
        XCTAssertEqual(try bundle.contentsOfDirectory(atPath: "docs"), ["a.pdf", "b.txt", "empty", "sub"])
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/a.pdf")), fixture.contents("docs/a.pdf"))
        let big = try bundle.openFile(atPath: "big.bin")
        XCTAssertEqual(Array(try big.read(upToCount: 9000, atOffset: 500_000)),
                       Array(fixture.contents("big.bin")[500_000..<509_000]))
    }

    func testFileByteSource_OpensTheSameBundle() throws {
        let fixture = try LibraryFixture.shared()
        let bundle = try EncryptedBundle(source: try FileByteSource(path: fixture.appBundle), unlock: .keyFile(fixture.keyFile))
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/sub/deep.txt")), bytes("deep\n"))
    }

    func testCustomByteSource_IsAllTheLibraryReads() throws {
        let fixture = try LibraryFixture.shared()
        let source = CountingSource(try fixture.bundleBytes(fixture.appBundle))
        let bundle = try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile))
        let before = source.reads
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/a.pdf")), fixture.contents("docs/a.pdf"))
        XCTAssertGreaterThan(source.reads, before)
    }

    // MARK: - Secrets stay inside

    func testMirror_ShowsNoInternals() throws {
        let (bundle, _) = try open()
        XCTAssertTrue(Mirror(reflecting: bundle).children.isEmpty)
        let file = try bundle.openFile(atPath: "docs/b.txt")
        XCTAssertEqual(Mirror(reflecting: file).children.compactMap(\.label), ["path", "size"])
    }
}
