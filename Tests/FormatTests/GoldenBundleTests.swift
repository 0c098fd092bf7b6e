import CryptCore
@testable import EncFSCore
import Foundation
import XCTest

/// A bundle written by an earlier build must keep opening: `Fixtures/v1/`
/// holds a frozen format-v1 bundle (made by Scripts/make-format-fixtures.sh
/// with encfs-pack), its key, its passphrase and a manifest of what it
/// holds, plus broken copies, each with the error it must give, and a
/// signed bundle of the same tree with its signing and verifying keys.
/// `Fixtures/v2/` does the same for format version 2: the tree with
/// compressible and duplicated files, packed with `--compress zstd`.
final class GoldenBundleTests: XCTestCase {
    struct Manifest: Decodable {
        struct Slot: Decodable {
            let kind: String
            let logN: UInt8?
            let r: UInt32?
            let p: UInt32?
        }

        struct Entry: Decodable {
            let path: String
            let pathHex: String
            let kind: String
            let mode: String
            let mtime: Int64
            let mtimeNanoseconds: UInt32
            let size: UInt64?
            let sha256: String?
            let targetHex: String?
        }

        let formatVersion: UInt16
        let chunkSizeLog2: UInt8
        let slots: [Slot]
        let entries: [Entry]
    }

    struct BrokenCase: Decodable {
        let file: String
        let what: String
        let error: String
        let version: UInt16?
        let expected: UInt64?
        let actual: UInt64?
        let read: String?
        /// The bundle opens; looking this path up fails (a damaged index
        /// page other than page 0, found where it is first used).
        let lookup: String?
        let entry: Int?
        let chunk: UInt64?
    }

    struct BrokenTable: Decodable {
        let cases: [BrokenCase]
    }

    // MARK: - Fixtures

    /// `Fixtures/<version>/<name>` in the test bundle, as a byte path.
    private func fixture(_ name: String, version: String = "v1") throws -> [UInt8] {
        let base = try XCTUnwrap(Bundle.module.resourceURL, "test bundle has no resources")
        let url = base.appendingPathComponent("Fixtures/\(version)").appendingPathComponent(name)
        XCTAssertTrue(FileManager.default.fileExists(atPath: url.path), "missing fixture Fixtures/\(version)/\(name)")
        return Array(url.path.utf8)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ name: String, version: String = "v1") throws -> T {
        try JSONDecoder().decode(type, from: Data(FileTree.readFile(fixture(name, version: version))))
    }

    private func goldenKey(version: String = "v1") throws -> KeyMaterial {
        let text = String(decoding: try FileTree.readFile(fixture("golden.key", version: version)), as: UTF8.self)
        let raw = try XCTUnwrap([UInt8](hex: text.trimmingCharacters(in: .whitespacesAndNewlines)), "golden.key is not hex")
        return .rawKey(try raw.withUnsafeBytes { try SymmetricKey(copying: $0) })
    }

    /// The passphrase file less its one trailing newline (as encfs-pack reads it).
    private func goldenPassphrase() throws -> KeyMaterial {
        var text = try FileTree.readFile(fixture("golden.passphrase"))
        if text.last == 0x0A { text.removeLast() }
        return .passphrase(SecureBytes(copying: text))
    }

    // MARK: - Golden bundle

    func testOpen_GoldenBundleWithKey_MatchesManifest() throws {
        try checkGolden(with: goldenKey())
    }

    func testOpen_GoldenBundleWithPassphrase_MatchesManifest() throws {
        try checkGolden(with: goldenPassphrase())
    }

    /// Slot kinds and costs as frozen, readable without a key.
    func testReadHeader_GoldenBundle_MatchesManifest() throws {
        let manifest = try decode(Manifest.self, "manifest.json")
        let (header, size) = try BundleReader.readHeader(path: fixture("golden.bundle"))
        XCTAssertEqual(manifest.formatVersion, BundleFormat.version)
        XCTAssertEqual(header.layout.chunkSizeLog2, manifest.chunkSizeLog2)
        XCTAssertEqual(header.bundleLength, size)
        XCTAssertEqual(header.slots.map(\.kindName), manifest.slots.map(\.kind))
        for (slot, expected) in zip(header.slots, manifest.slots) where expected.kind == "passphrase" {
            XCTAssertEqual(slot.scryptParameters, Scrypt.Parameters(logN: try XCTUnwrap(expected.logN), r: try XCTUnwrap(expected.r),
                                                                    p: try XCTUnwrap(expected.p)))
        }
    }

    // MARK: - Signed bundle

    /// `signed.bundle`: the same tree behind a raw-key slot, signed by the
    /// key in `signed.sign`. It keeps opening under its verifying key, every
    /// chunk matches the signed digest, and the signer is the one frozen here.
    func testOpen_SignedBundleUnderVerifyingKey_MatchesManifestAndSignature() throws {
        let pem = try FileTree.readFile(fixture("signed.sign.pub"))
        let signer = try pem.withUnsafeBytes { (raw) throws(CryptError) in try SigningPublicKey(pemRepresentation: raw) }
        XCTAssertEqual(BundleSignature.fingerprint(of: signer), "f741f2b8f653bf05")
        let reader = try checkGolden(with: goldenKey(), bundle: "signed.bundle", origin: OriginPolicy(signers: [signer]))
        XCTAssertEqual(reader.header.slots.map(\.kindName), ["raw-key", "signature"])
        XCTAssertEqual(try reader.header.signature()?.signerFingerprint, "f741f2b8f653bf05")
        XCTAssertEqual(try BundleVerifier.verify(reader).matchesSignature(of: reader.header), true)
        // The key in signed.sign is that signer's.
        let key = try FileTree.readFile(fixture("signed.sign"))
        XCTAssertEqual(try key.withUnsafeBytes { (raw) throws(CryptError) in try SigningKey(pemRepresentation: raw) }.publicKey, signer)
    }

    func testOpen_SignedBundleUnderAnotherKey_Refused() throws {
        let other = try SigningKey.generate()
        XCTAssertThrowsBundleError(.untrustedSigner(fingerprint: "f741f2b8f653bf05")) {
            try BundleReader.open(path: fixture("signed.bundle"), materials: [goldenKey()],
                                  origin: OriginPolicy(signers: [other.publicKey]))
        }
        XCTAssertThrowsBundleError(.notSigned) {
            try BundleReader.open(path: fixture("golden.bundle"), materials: [goldenKey()],
                                  origin: OriginPolicy(signers: [other.publicKey]))
        }
    }

    @discardableResult
    private func checkGolden(with material: KeyMaterial, bundle: String = "golden.bundle", origin: OriginPolicy = OriginPolicy(),
                             version: String = "v1", file: StaticString = #filePath, line: UInt = #line) throws -> BundleReader {
        let manifest = try decode(Manifest.self, "manifest.json", version: version)
        let reader = try BundleReader.open(path: fixture(bundle, version: version), materials: [material], origin: origin)
        XCTAssertEqual(reader.header.features.formatVersion, manifest.formatVersion, file: file, line: line)
        XCTAssertEqual(reader.header.layout.chunkSizeLog2, manifest.chunkSizeLog2, file: file, line: line)
        XCTAssertEqual(reader.index.count, manifest.entries.count, "entry count", file: file, line: line)
        for (position, expected) in manifest.entries.enumerated() where position < reader.index.count {
            let path = try XCTUnwrap([UInt8](hex: expected.pathHex))
            let what = "\(expected.path) (index position \(position))"
            let entry = try reader.index.entry(at: position)
            XCTAssertEqual(try reader.index.path(of: entry), path, "\(what): index order", file: file, line: line)
            XCTAssertEqual(try reader.entry(path).position, position, "\(what): lookup", file: file, line: line)
            XCTAssertEqual(entry.mode, UInt16(expected.mode, radix: 8), "\(what): mode", file: file, line: line)
            XCTAssertEqual(entry.mtimeSeconds, expected.mtime, "\(what): mtime", file: file, line: line)
            XCTAssertEqual(entry.mtimeNanoseconds, expected.mtimeNanoseconds, "\(what): mtime nanoseconds", file: file, line: line)
            switch expected.kind {
            case "file":
                XCTAssertEqual(entry.kind, .file, what, file: file, line: line)
                XCTAssertEqual(entry.fileSize, expected.size, "\(what): size", file: file, line: line)
                let contents = try reader.contents(of: entry)
                XCTAssertEqual(contents.withUnsafeBytes { SHA256.hash($0) }.hexString, expected.sha256, "\(what): contents", file: file, line: line)
            case "directory":
                XCTAssertEqual(entry.kind, .directory, what, file: file, line: line)
                let children = manifest.entries.filter { e in
                    let p = [UInt8](hex: e.pathHex) ?? []
                    return !p.isEmpty && Array(p[..<(p.lastIndex(of: 0x2F) ?? 0)]) == path
                }
                XCTAssertEqual(try entry.children.map { try reader.index.name(of: reader.index.entry(at: $0)).hexString },
                               children.map { e in
                                   let p = [UInt8](hex: e.pathHex) ?? []
                                   return Array(p[(p.lastIndex(of: 0x2F).map { $0 + 1 } ?? 0)...]).hexString
                               }, "\(what): listing", file: file, line: line)
            case "symlink":
                XCTAssertEqual(entry.kind, .symlink, what, file: file, line: line)
                XCTAssertEqual(try reader.index.withSymlinkTarget(of: entry) { Array($0) }.hexString, expected.targetHex,
                               "\(what): target", file: file, line: line)
            default:
                XCTFail("\(what): unknown kind \(expected.kind) in the manifest", file: file, line: line)
            }
        }
        return reader
    }

    // MARK: - Broken fixtures

    func testOpen_BrokenFixtures_FailWithTheirErrors() throws {
        try checkBroken(version: "v1")
    }

    // MARK: - Version 2

    /// `Fixtures/v2/golden.bundle`: compressed (zstd level 3, 4 KiB chunks)
    /// with a duplicated file, frozen; it keeps opening and matches its
    /// manifest, its duplicates share one body, and verify finds it intact.
    func testOpen_GoldenV2Bundle_MatchesManifest() throws {
        let reader = try checkGolden(with: goldenKey(version: "v2"), version: "v2")
        XCTAssertEqual(reader.header.features.compression, .zstd)
        XCTAssertEqual(reader.header.features.compressionLevel, 3)
        let one = try reader.entry(bytes("site/app.js")), two = try reader.entry(bytes("copy/app.js"))
        XCTAssertTrue(one.hasChunkTable)
        XCTAssertEqual(one.payloadOffset, two.payloadOffset)
        XCTAssertLessThan(reader.index.storedFileBytes, reader.index.distinctFileBytes / 2)
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty)
    }

    func testOpen_BrokenV2Fixtures_FailWithTheirErrors() throws {
        try checkBroken(version: "v2")
    }

    // MARK: - Version 2, paged index

    /// `Fixtures/v2-paged/golden.bundle`: the version 2 tree with the paged
    /// index encfs-pack writes for every version 2 bundle; it keeps opening,
    /// matches the same manifest, and verify (every page, every chunk, the
    /// rules that span pages) finds it intact.
    func testOpen_GoldenV2PagedBundle_MatchesManifest() throws {
        let reader = try checkGolden(with: goldenKey(version: "v2-paged"), version: "v2-paged")
        XCTAssertTrue(reader.index.isPaged)
        XCTAssertTrue(reader.header.features.hasPagedIndex)
        let one = try reader.entry(bytes("site/app.js")), two = try reader.entry(bytes("copy/app.js"))
        XCTAssertTrue(one.hasChunkTable)
        XCTAssertEqual(one.payloadOffset, two.payloadOffset)
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        try reader.index.checkWholeIndex()
    }

    func testOpen_BrokenV2PagedFixtures_FailWithTheirErrors() throws {
        try checkBroken(version: "v2-paged")
    }

    // MARK: - Version 2, fragments

    /// `Fixtures/v2-fragments/golden.bundle`: small files in two fragments
    /// (header flag bit 0), one slice shared by two paths; it keeps
    /// opening, matches its manifest, and verify finds it intact.
    func testOpen_GoldenV2FragmentsBundle_MatchesManifest() throws {
        let reader = try checkGolden(with: goldenKey(version: "v2-fragments"), version: "v2-fragments")
        XCTAssertTrue(reader.header.features.hasFragments)
        let a = try reader.entry(bytes("a.h")), copy = try reader.entry(bytes("lib/copy.h"))
        let b = try reader.entry(bytes("b.h")), hello = try reader.entry(bytes("hello.txt"))
        XCTAssertTrue(a.isFragmentSlice && b.isFragmentSlice && hello.isFragmentSlice)
        XCTAssertEqual(a.fragmentDescriptor, copy.fragmentDescriptor)
        XCTAssertEqual(a.sliceOffset, copy.sliceOffset)
        XCTAssertNotEqual(a.fragmentDescriptor, b.fragmentDescriptor, "two fragments")
        XCTAssertEqual(b.fragmentDescriptor, hello.fragmentDescriptor)
        XCTAssertFalse(try reader.entry(bytes("lib/big.txt")).isFragmentSlice)
        XCTAssertFalse(try reader.entry(bytes("empty.c")).isFragmentSlice)
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        try reader.index.checkWholeIndex()
        XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty)
    }

    func testOpen_BrokenV2FragmentsFixtures_FailWithTheirErrors() throws {
        try checkBroken(version: "v2-fragments")
    }

    // MARK: - Version 2, fragment units

    /// `Fixtures/v2-fragment-units/golden.bundle`: 4 KiB chunks, small
    /// files in two fragments of 16 KiB units (header flags 0x0E01), the
    /// first filled past one chunk, one slice shared by two paths; it
    /// keeps opening, matches its manifest, and verify finds it intact.
    func testOpen_GoldenV2FragmentUnitsBundle_MatchesManifest() throws {
        let reader = try checkGolden(with: goldenKey(version: "v2-fragment-units"), version: "v2-fragment-units")
        XCTAssertTrue(reader.header.features.hasFragments)
        XCTAssertEqual(reader.header.features.fragmentUnitLog2, 14)
        let a = try reader.entry(bytes("a.h")), copy = try reader.entry(bytes("lib/copy.h"))
        let h2 = try reader.entry(bytes("lib/h2.h")), hello = try reader.entry(bytes("hello.txt"))
        let notes = try reader.entry(bytes("notes.txt"))
        XCTAssertTrue(a.isFragmentSlice && h2.isFragmentSlice && hello.isFragmentSlice && notes.isFragmentSlice)
        XCTAssertEqual(a.fragmentDescriptor, copy.fragmentDescriptor)
        XCTAssertEqual(a.sliceOffset, copy.sliceOffset)
        XCTAssertEqual(a.fragmentDescriptor, h2.fragmentDescriptor, "one unit for noise.bin, every .h and hello.txt")
        XCTAssertEqual(a.fragmentDescriptor, hello.fragmentDescriptor, "one unit for noise.bin, every .h and hello.txt")
        XCTAssertNotEqual(a.fragmentDescriptor, notes.fragmentDescriptor, "two fragments")
        let first = try reader.index.body(of: a).body
        XCTAssertEqual(first.fileSize, 16263, "filled past one 4 KiB chunk")
        XCTAssertFalse(try reader.entry(bytes("lib/big.txt")).isFragmentSlice)
        XCTAssertFalse(try reader.entry(bytes("empty.c")).isFragmentSlice)
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        try reader.index.checkWholeIndex()
        XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty)
    }

    func testOpen_BrokenV2FragmentUnitsFixtures_FailWithTheirErrors() throws {
        try checkBroken(version: "v2-fragment-units")
    }

    private func checkBroken(version: String) throws {
        let table = try decode(BrokenTable.self, "broken/expected.json", version: version)
        let key = try goldenKey(version: version)
        // Every file in broken/ has a row, and every row a file.
        let directory = try fixture("broken", version: version)
        let files = try FileTree.list(directory).map { String(decoding: $0, as: UTF8.self) }.filter { $0 != "expected.json" }
        XCTAssertEqual(files.sorted(), table.cases.map(\.file).sorted(), "broken/ and expected.json disagree")
        XCTAssertGreaterThanOrEqual(table.cases.count, version == "v1" ? 10 : 6)

        for row in table.cases {
            let path = try fixture("broken/\(row.file)", version: version)
            let what = "\(row.file) (\(row.what))"
            let expected: ExpectedBundleError
            switch row.error {
            case "notABundle": expected = .notABundle
            case "unsupportedVersion": expected = .unsupportedVersion(try XCTUnwrap(row.version, what))
            case "corruptHeader": expected = .corruptHeader
            case "headerAuthenticationFailed": expected = .headerAuthenticationFailed
            case "corruptIndex": expected = .corruptIndex
            case "lengthMismatch":
                expected = .lengthMismatch(expected: try XCTUnwrap(row.expected, what), actual: try XCTUnwrap(row.actual, what))
            case "corruptChunk": expected = .corruptChunk(entry: try XCTUnwrap(row.entry, what), chunk: try XCTUnwrap(row.chunk, what))
            default:
                XCTFail("\(what): unknown error \(row.error) in expected.json")
                continue
            }
            if let lookup = row.lookup {
                let reader = try BundleReader.open(path: path, materials: [key])
                XCTAssertThrowsBundleError(expected, what) { try reader.entry(bytes(lookup)) }
            } else if let read = row.read {
                // Opens; reading the named file fails, and the other files still read.
                let reader = try BundleReader.open(path: path, materials: [key])
                let entry = try reader.entry(bytes(read))
                XCTAssertThrowsBundleError(expected, what) { try reader.contents(of: entry) }
                XCTAssertEqual(try reader.contents(of: bytes("hello.txt")), bytes("hello, world\n"), what)
            } else {
                XCTAssertThrowsBundleError(expected, what) { try BundleReader.open(path: path, materials: [key]) }
            }
        }
    }
}
