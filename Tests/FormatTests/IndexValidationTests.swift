import CryptCore
import Foundation
@testable import EncFSCore
import XCTest

/// `BundleIndex` on index plaintext built here byte by byte (layout in
/// docs/FORMAT.md): a large index opens and every name is found; the checks
/// that run without per-entry arrays (file data in or out of record order,
/// subdirectory counts kept beside the records, 8 bytes per parent directory) give the same answers as before.
final class IndexValidationTests: XCTestCase {
    /// One entry of a hand-built index.
    struct Record {
        var parent: Int
        var kind: IndexEntry.Kind
        var name: [UInt8]
        var size: UInt64 = 0
        var first: UInt64 = 0
        var reserved28: UInt32 = 0
    }

    /// Index plaintext for `records` (record 0 the root), names in order.
    static func plaintext(_ records: [Record]) -> [UInt8] {
        var strings: [UInt8] = []
        var out = Array("ENCFSIDX".utf8)
        out.appendLE(UInt32(records.count))
        out.appendLE(UInt32(0))
        let stringsLength = records.reduce(0) { $0 + $1.name.count }
        out.appendLE(UInt64(stringsLength))
        out.appendLE(Int64(1_700_000_000))
        for (position, r) in records.enumerated() {
            out.appendLE(UInt32(r.parent))
            out.append(r.kind.rawValue)
            out.append(0)
            out.appendLE(UInt16(r.kind == .directory ? 0o755 : 0o644))
            out.appendLE(UInt32(strings.count))
            out.appendLE(UInt16(r.name.count))
            out.appendLE(UInt16(0))
            strings += r.name
            out.appendLE(Int64(1_700_000_000))
            out.appendLE(UInt32(0))
            out.appendLE(r.reserved28)
            out.appendLE(r.size)
            out.appendLE(r.first)
            // A distinct non-zero file id per file.
            var id = [UInt8](repeating: 0, count: 16)
            if r.kind == .file { withUnsafeBytes(of: UInt64(position + 1).littleEndian) { id.replaceSubrange(0..<8, with: $0) } }
            out += id
        }
        return out + strings
    }

    static let layout = ChunkLayout(chunkSizeLog2: 12)

    static func open(_ records: [Record], dataLength: UInt64 = 1 << 40) throws -> BundleIndex {
        let bytes = plaintext(records)
        return try bytes.withUnsafeBytes { raw in
            try BundleIndex(plaintext: SecureBytes(copying: raw), layout: layout, dataLength: dataLength)
        }
    }

    /// Root with files of `sizes` at payload offsets `offsets` (record order).
    static func files(sizes: [UInt64], offsets: [UInt64]) -> [Record] {
        var records = [Record(parent: 0, kind: .directory, name: [], size: UInt64(sizes.count), first: sizes.isEmpty ? 0 : 1)]
        for (i, size) in sizes.enumerated() {
            records.append(Record(parent: 0, kind: .file, name: Array("f\(i)".utf8), size: size, first: offsets[i]))
        }
        return records
    }

    private func assertCorruptIndex(_ records: [Record], _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try Self.open(records), message, file: file, line: line) { error in
            guard let e = error as? BundleError else { return XCTFail("not a BundleError: \(error)", file: file, line: line) }
            XCTAssertEqual(ExpectedBundleError(e), .corruptIndex, "\(e)", file: file, line: line)
        }
    }

    // MARK: - Many entries

    /// 200 directories of 1,000 files: opens, and every name is found by
    /// binary search and by path, with the right sizes and counts.
    func testOpen_TwoHundredThousandFiles_EveryNameFound() throws {
        let directories = 200
        let perDirectory = 1000
        var records = [Record(parent: 0, kind: .directory, name: [], size: UInt64(directories), first: 1)]
        for d in 0..<directories {
            records.append(Record(parent: 0, kind: .directory, name: Array(String(format: "d%04d", d).utf8),
                                  size: UInt64(perDirectory), first: UInt64(1 + directories + d * perDirectory)))
        }
        var offset: UInt64 = 0
        for d in 0..<directories {
            for f in 0..<perDirectory {
                let size = UInt64(1 + (d * perDirectory + f) % 200)
                records.append(Record(parent: 1 + d, kind: .file, name: Array(String(format: "f%07d.txt", d * perDirectory + f).utf8),
                                      size: size, first: offset))
                offset += Self.layout.ciphertextSize(forPlaintextSize: size)
            }
        }
        let index = try Self.open(records, dataLength: offset)
        XCTAssertEqual(index.count, records.count)
        XCTAssertEqual(index.fileCount, directories * perDirectory)
        XCTAssertEqual(index.subdirectoryCount(of: try index.root), directories)
        for d in 0..<directories {
            let directory = try index.entry(at: 1 + d)
            XCTAssertEqual(index.subdirectoryCount(of: directory), 0)
            for f in 0..<perDirectory {
                let position = 1 + directories + d * perDirectory + f
                let name = records[position].name
                let found = try name.withUnsafeBytes { try index.lookup($0, in: directory) }
                guard found?.position == position else {
                    return XCTFail("lookup of \(String(decoding: name, as: UTF8.self)) found \(String(describing: found?.position))")
                }
                XCTAssertEqual(found?.fileSize, records[position].size)
            }
        }
        let last = try index.resolve(path: Array(String(format: "d%04d/f%07d.txt", directories - 1, directories * perDirectory - 1).utf8))
        XCTAssertEqual(last.position, records.count - 1)
        XCTAssertThrowsError(try index.resolve(path: Array("d0000/f9999999.txt".utf8)))
    }

    /// The check copies a batch's names in one piece when they lie close
    /// together; names spread wider than that (here one name placed after
    /// 70,000 unused bytes of the string region) are copied one by one,
    /// with the same checks: the index opens, every name is found, and a
    /// name out of order is still refused.
    func testOpen_NamesSpreadBeyondOneCopy_SameChecks() throws {
        let count = 300
        var records = [Record(parent: 0, kind: .directory, name: [], size: UInt64(count), first: 1)]
        for f in 0..<count {
            records.append(Record(parent: 0, kind: .file, name: Array(String(format: "n%04d", f).utf8), size: 0, first: 0))
        }
        func spread(_ records: [Record]) -> [UInt8] {
            var bytes = Self.plaintext(records)
            let last = records.count - 1
            let recordAt = 32 + last * IndexEntry.recordSize
            let filler = [UInt8](repeating: 0x41, count: 70_000)
            let stringsLength = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16, as: UInt64.self) })
            // The last name moves behind the filler; its old bytes stay, unused.
            bytes.withUnsafeMutableBytes {
                $0.storeBytes(of: UInt32(stringsLength + filler.count).littleEndian, toByteOffset: recordAt + 8, as: UInt32.self)
                $0.storeBytes(of: UInt64(stringsLength + filler.count + records[last].name.count).littleEndian,
                              toByteOffset: 16, as: UInt64.self)
            }
            return bytes + filler + records[last].name
        }
        func open(_ bytes: [UInt8]) throws -> BundleIndex {
            try bytes.withUnsafeBytes { try BundleIndex(plaintext: SecureBytes(copying: $0), layout: Self.layout, dataLength: 1 << 40) }
        }
        let index = try open(spread(records))
        for position in 1...count {
            let found = try records[position].name.withUnsafeBytes { try index.lookup($0, in: try index.root) }
            XCTAssertEqual(found?.position, position)
        }
        // Out of order where the names are copied one by one, and where a
        // batch's names are copied at once.
        var unordered = records
        unordered[count].name = Array("a0000".utf8) // sorts before its predecessor
        XCTAssertThrowsError(try open(spread(unordered))) { error in
            XCTAssertEqual(ExpectedBundleError(error as? BundleError ?? .notABundle), .corruptIndex, "\(error)")
        }
        var early = records
        early[5].name = Array("a0000".utf8)
        assertCorruptIndex(early, "name out of order inside a batch copied at once")
    }

    // MARK: - File data ranges

    func testOpen_DataInRecordOrder_Opens() throws {
        let index = try Self.open(Self.files(sizes: [100, 0, 5000, 1], offsets: [0, 7, 116, 116 + 5032]))
        XCTAssertEqual(index.fileCount, 4)
        XCTAssertEqual(index.totalFileBytes, 5101)
    }

    func testOpen_DataOutOfRecordOrderWithoutOverlap_Opens() throws {
        // f0 after f1 after f2: not written by encfs-pack, but valid.
        let index = try Self.open(Self.files(sizes: [100, 100, 100], offsets: [232, 116, 0]))
        XCTAssertEqual(index.fileCount, 3)
    }

    func testOpen_DataOverlapsPreviousFile_FailsCorruptIndex() {
        assertCorruptIndex(Self.files(sizes: [100, 100], offsets: [0, 115]), "f1 starts inside f0")
    }

    func testOpen_DataOverlapsOutOfRecordOrder_FailsCorruptIndex() {
        // f1 lies before f0 (out of order), f2 inside f1.
        assertCorruptIndex(Self.files(sizes: [100, 100, 10], offsets: [1000, 0, 50]), "f2 starts inside f1")
    }

    func testOpen_SameOffsetAsEmptyFile_Opens() throws {
        // An empty file has no chunk data, so sharing an offset is no overlap.
        _ = try Self.open(Self.files(sizes: [0, 100, 0], offsets: [0, 0, 0]))
    }

    // MARK: - Subdirectory counts

    func testSubdirectoryCount_NestedDirectories() throws {
        // root: a/ b/ c ; a: x/ y/ z ; b: (empty) ; x: w/ ; y, w: empty
        let records = [
            Record(parent: 0, kind: .directory, name: [], size: 3, first: 1),
            Record(parent: 0, kind: .directory, name: Array("a".utf8), size: 3, first: 4),
            Record(parent: 0, kind: .directory, name: Array("b".utf8)),
            Record(parent: 0, kind: .file, name: Array("c".utf8)),
            Record(parent: 1, kind: .directory, name: Array("x".utf8), size: 1, first: 7),
            Record(parent: 1, kind: .directory, name: Array("y".utf8)),
            Record(parent: 1, kind: .file, name: Array("z".utf8)),
            Record(parent: 4, kind: .directory, name: Array("w".utf8)),
        ]
        let index = try Self.open(records)
        XCTAssertEqual(try (0..<records.count).map { index.subdirectoryCount(of: try index.entry(at: $0)) }, [2, 2, 0, 0, 1, 0, 0, 0])
    }

    func testOpen_DirectoryReservedBytesSet_FailsCorruptIndex() {
        // Reserved bytes must be zero in the bundle.
        var records = Self.files(sizes: [1], offsets: [0])
        records[0].reserved28 = 1
        assertCorruptIndex(records, "root's reserved bytes 28..<32 are not zero")
    }
}
