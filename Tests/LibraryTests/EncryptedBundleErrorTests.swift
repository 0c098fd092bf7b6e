import EncFS
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Each case of `EncryptedBundleError`, raised by what causes it: the wrong
/// secret, bytes that are not a bundle, a bundle damaged in a known place,
/// paths that do not lead to what was asked for, a failing byte source.
final class EncryptedBundleErrorTests: XCTestCase {
    /// Fails unless `body` throws exactly `expected`.
    private func assertThrows<T>(_ expected: EncryptedBundleError, _ body: () throws -> T,
                                 file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(thrown(body, file: file, line: line), expected, file: file, line: line)
    }

    /// The `EncryptedBundleError` that `body` throws; fails the test when it
    /// throws nothing or another type.
    private func thrown<T>(_ body: () throws -> T, file: StaticString = #filePath,
                           line: UInt = #line) -> EncryptedBundleError? {
        do {
            _ = try body()
            XCTFail("no error", file: file, line: line)
        } catch let error as EncryptedBundleError {
            return error
        } catch {
            XCTFail("not an EncryptedBundleError: \(error)", file: file, line: line)
        }
        return nil
    }

    func testErrors_AreTypedSoASwitchNeedsNoCast() throws {
        let fixture = try LibraryFixture.shared()
        // This compiles only because the call throws EncryptedBundleError
        // (typed throws), and the switch is checked for completeness.
        do throws(EncryptedBundleError) {
            _ = try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.otherKeyFile))
            XCTFail("opened with the wrong key")
        } catch {
            switch error {
            case .wrongKey(let kinds): XCTAssertEqual(kinds, [.key])
            case .unusableKey, .notABundle, .unsupportedVersion, .damagedBundle, .damagedChunk, .noSuchFile,
                 .notADirectory, .isADirectory, .symlinkOutsideBundle, .tooLarge, .io, .cryptoFailure, .notSigned,
                 .untrustedSigner, .badSignature, .unexpectedBundleID:
                XCTFail("expected wrongKey, got \(error)")
            }
        }
    }

    private func openApp() throws -> EncryptedBundle {
        let fixture = try LibraryFixture.shared()
        return try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.keyFile))
    }

    /// A copy of the bundle at `path` with `change` applied, in memory.
    private func damaged(_ path: String, _ change: (inout [UInt8]) -> Void) throws -> MemoryByteSource {
        var bytes = try LibraryFixture.shared().bundleBytes(path)
        change(&bytes)
        return MemoryByteSource(bytes: bytes, name: "damaged copy")
    }

    /// The header length H of a bundle, from its fixed header (u32 LE at
    /// offset 12, docs/FORMAT.md).
    private func headerLength(_ bytes: [UInt8]) -> Int {
        (0..<4).reduce(0) { $0 | Int(bytes[12 + $1]) << (8 * $1) }
    }

    // MARK: - Secrets

    func testOpen_WrongKeyListsTheRawKeySlot() throws {
        let fixture = try LibraryFixture.shared()
        assertThrows(.wrongKey(slotKinds: [.key])) {
            try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.otherKeyFile))
        }
        let error = thrown { try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.otherKeyFile)) }
        XCTAssertEqual(error?.description, "wrong key: no key slot opened (the bundle has raw-key slots)")
    }

    func testOpen_WrongKeyListsPassphraseAndRecipientSlots() throws {
        let fixture = try LibraryFixture.shared()
        assertThrows(.wrongKey(slotKinds: [.passphrase, .x25519Recipient])) {
            try EncryptedBundle(path: fixture.multiBundle, unlock: .keyFile(fixture.keyFile))
        }
        assertThrows(.wrongKey(slotKinds: [.passphrase, .x25519Recipient])) {
            try EncryptedBundle(path: fixture.multiBundle, unlock: .passphrase("not the passphrase"))
        }
    }

    func testOpen_UnusableKey_MissingKeyFile() throws {
        let fixture = try LibraryFixture.shared()
        let missing = fixture.scratch.appending("no-such.key")
        guard case .unusableKey(let reason) = thrown({ try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(missing)) }) else {
            return XCTFail("expected unusableKey")
        }
        XCTAssertTrue(reason.contains("no-such.key"), reason)
    }

    func testOpen_UnusableKey_RawKeyOfWrongLength() throws {
        let fixture = try LibraryFixture.shared()
        guard case .unusableKey(let reason) = thrown({ try EncryptedBundle(path: fixture.appBundle, unlock: .key([1, 2, 3])) }) else {
            return XCTFail("expected unusableKey")
        }
        XCTAssertTrue(reason.contains("32 bytes"), reason)
    }

    func testOpen_UnusableKey_OneBrokenFileAmongSeveral() throws {
        let fixture = try LibraryFixture.shared()
        let error = thrown {
            try EncryptedBundle(path: fixture.appBundle, unlock: .any([.keyFile(fixture.keyFile), .identityFile(fixture.keyFile)]))
        }
        guard case .unusableKey = error else { return XCTFail("expected unusableKey, got \(String(describing: error))") }
    }

    // MARK: - The bundle as a whole

    func testOpen_NotABundle() throws {
        let fixture = try LibraryFixture.shared()
        assertThrows(.notABundle) {
            try EncryptedBundle(source: MemoryByteSource(bytes: bytes("plain text, not a bundle")), unlock: .keyFile(fixture.keyFile))
        }
        assertThrows(.notABundle) {
            try EncryptedBundle(source: MemoryByteSource(bytes: []), unlock: .keyFile(fixture.keyFile))
        }
        assertThrows(.notABundle) {
            try EncryptedBundle(path: fixture.keyFile, unlock: .keyFile(fixture.keyFile))
        }
    }

    func testOpen_UnsupportedVersion() throws {
        let fixture = try LibraryFixture.shared()
        let source = try damaged(fixture.appBundle) { $0[8] = 9 } // format version, u16 LE at offset 8
        assertThrows(.unsupportedVersion(9)) { try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile)) }
    }

    func testOpen_DamagedHeader() throws {
        let fixture = try LibraryFixture.shared()
        let source = try damaged(fixture.appBundle) { $0[self.headerLength($0) - 1] ^= 0x01 } // last byte of the header MAC
        guard case .damagedBundle(.header, _) = thrown({ try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile)) }) else {
            return XCTFail("expected damagedBundle(.header)")
        }
    }

    func testOpen_DamagedIndex() throws {
        let fixture = try LibraryFixture.shared()
        let source = try damaged(fixture.appBundle) { $0[$0.count - 1] ^= 0x01 } // the index's tag ends the file
        guard case .damagedBundle(.index, _) = thrown({ try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile)) }) else {
            return XCTFail("expected damagedBundle(.index)")
        }
    }

    func testOpen_TruncatedOrExtendedBundle() throws {
        let fixture = try LibraryFixture.shared()
        for change: (inout [UInt8]) -> Void in [{ $0.append(0) }, { $0.removeLast() }] {
            let source = try damaged(fixture.appBundle, change)
            guard case .damagedBundle(.fileLength, _) = thrown({ try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile)) }) else {
                return XCTFail("expected damagedBundle(.fileLength)")
            }
        }
    }

    func testOpen_MissingBundleFileIsENOENT() throws {
        let fixture = try LibraryFixture.shared()
        let missing = fixture.scratch.appending("no-such.bundle")
        guard case .io(let code, let what) = thrown({ try EncryptedBundle(path: missing, unlock: .keyFile(fixture.keyFile)) }) else {
            return XCTFail("expected io")
        }
        XCTAssertEqual(code, ENOENT)
        XCTAssertTrue(what.contains("no-such.bundle"), what)
    }

    // MARK: - Chunks

    func testRead_DamagedChunkNamesPathAndChunk() throws {
        let fixture = try LibraryFixture.shared()
        // one.bundle holds one file, so its chunks start the payload: chunk
        // i at H + i · (4096 + 16) (docs/FORMAT.md).
        let source = try damaged(fixture.oneBundle) { $0[self.headerLength($0) + (LibraryFixture.chunkSize + 16) + 100] ^= 0x01 }
        let bundle = try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile))
        let file = try bundle.openFile(atPath: "one.bin")
        let chunk = LibraryFixture.chunkSize

        // The chunks around the damaged one still read.
        XCTAssertEqual(Array(try file.read(upToCount: chunk, atOffset: 0)), Array(fixture.oneFile[0..<chunk]))
        XCTAssertEqual(Array(try file.read(upToCount: chunk, atOffset: UInt64(2 * chunk))), Array(fixture.oneFile[(2 * chunk)..<(3 * chunk)]))

        assertThrows(.damagedChunk(path: bytes("one.bin"), chunk: 1)) { try file.read(upToCount: 10, atOffset: UInt64(chunk + 5)) }
        assertThrows(.damagedChunk(path: bytes("one.bin"), chunk: 1)) { try bundle.contents(atPath: "one.bin") }
        XCTAssertEqual(thrown { try bundle.contents(atPath: "/one.bin") }?.description, "chunk 1 of /one.bin failed authentication")

        // A failed read leaves no plaintext in the caller's buffer, not even
        // from the chunk before the damaged one.
        var buffer = [UInt8](repeating: 0xA5, count: fixture.oneFile.count)
        assertThrows(.damagedChunk(path: bytes("one.bin"), chunk: 1)) {
            try buffer.withUnsafeMutableBytes { try file.read(into: $0, atOffset: 0) }
        }
        XCTAssertNotEqual(Array(buffer[0..<chunk]), Array(fixture.oneFile[0..<chunk]))
        XCTAssertTrue(buffer.allSatisfy { $0 == 0 }, "the buffer is wiped")
    }

    // MARK: - Paths

    func testPath_NoSuchFile() throws {
        let bundle = try openApp()
        assertThrows(.noSuchFile(path: bytes("docs/nope"))) { try bundle.contents(atPath: "docs/nope") }
        assertThrows(.noSuchFile(path: bytes("nope"))) { try bundle.contentsOfDirectory(atPath: "nope") }
        assertThrows(.noSuchFile(path: bytes("nope/a"))) { try bundle.attributesOfItem(atPath: "nope/a") }
        assertThrows(.noSuchFile(path: bytes("nope"))) { try bundle.openFile(atBytePath: bytes("nope")) }
    }

    func testPath_NotADirectory() throws {
        let bundle = try openApp()
        assertThrows(.notADirectory(path: bytes("docs/b.txt"))) { try bundle.contentsOfDirectory(atPath: "docs/b.txt") }
        assertThrows(.notADirectory(path: bytes("docs/b.txt/x"))) { try bundle.attributesOfItem(atPath: "docs/b.txt/x") }
        assertThrows(.notADirectory(path: bytes("big.bin"))) { try bundle.subpathsOfDirectory(atPath: "big.bin") }
        assertThrows(.notADirectory(path: bytes("link-a"))) { try bundle.contentsOfDirectory(atPath: "link-a") }
    }

    func testPath_IsADirectory() throws {
        let bundle = try openApp()
        assertThrows(.isADirectory(path: bytes("docs"))) { try bundle.contents(atPath: "docs") }
        assertThrows(.isADirectory(path: bytes(""))) { try bundle.openFile(atPath: "") }
        assertThrows(.isADirectory(path: bytes("link-docs"))) { try bundle.openFile(atPath: "link-docs") }
    }

    func testPath_SymlinkOutsideBundleIsNotFollowed() throws {
        let bundle = try openApp()
        assertThrows(.symlinkOutsideBundle(path: bytes("outside"))) { try bundle.contents(atPath: "outside") }
        // The link itself is there to be described.
        XCTAssertEqual(try bundle.attributesOfItem(atPath: "outside").symbolicLinkTarget, "/etc/passwd")
    }

    func testPath_SymlinkLoopIsELOOP() throws {
        let bundle = try openApp()
        guard case .io(let code, _) = thrown({ try bundle.contents(atPath: "loop") }) else { return XCTFail("expected io") }
        XCTAssertEqual(code, ELOOP)
    }

    // MARK: - Byte sources

    func testRead_ByteSourceErrorsBecomeIO() throws {
        let fixture = try LibraryFixture.shared()
        let source = CountingSource(try fixture.bundleBytes(fixture.appBundle))
        let bundle = try EncryptedBundle(source: source, unlock: .keyFile(fixture.keyFile))
        let file = try bundle.openFile(atPath: "docs/a.pdf")

        struct Unreachable: Error {}
        source.failReads(with: Unreachable())
        guard case .io(let code, _) = thrown({ try file.read(upToCount: 10, atOffset: 0) }) else { return XCTFail("expected io") }
        XCTAssertEqual(code, EIO)

        // A source that throws EncryptedBundleError is passed through as is.
        source.failReads(with: EncryptedBundleError.io(errno: ENETDOWN, what: "GET app.bundle"))
        assertThrows(.io(errno: ENETDOWN, what: "GET app.bundle")) { try bundle.contents(atPath: "docs/b.txt") }
    }
}
