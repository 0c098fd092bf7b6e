@testable import EncFSCore
import XCTest

/// `IndexRecord` reads each field at its offset in the layout of
/// docs/FORMAT.md and writes records a hand-built layout agrees with;
/// `IndexEntry`'s accessors answer by kind; the two index headers decode
/// and encode alike.
final class IndexRecordTests: XCTestCase {
    private static let id = (1...16).map { UInt8($0) }

    /// A record whose every field holds a value no other field holds.
    private static let distinct = RawIndexRecord(parent: 0x0102_0304, kind: 3, flags: 0x05, mode: 0o1755, nameOffset: 0x0A0B_0C0D,
                                                 nameLength: 0x0E0F, reserved: 0x1011, seconds: -0x1213_1415_1617,
                                                 nanoseconds: 0x1819_1A1B, table: 0x1C1D_1E1F, count: 0x2021_2223_2425_2627,
                                                 first: 0x2829_2A2B_2C2D_2E2F, id: id)

    func testAccessors_ReadEachFieldAtItsOffset() {
        Self.distinct.withRecord { r in
            XCTAssertEqual(r.parent, 0x0102_0304)
            XCTAssertEqual(r.kindByte, 3)
            XCTAssertEqual(r.kind, .symlink)
            XCTAssertEqual(r.flags, 0x05)
            XCTAssertEqual(r.mode, 0o1755)
            XCTAssertEqual(r.name.offset, 0x0A0B_0C0D)
            XCTAssertEqual(r.name.length, 0x0E0F)
            XCTAssertFalse(r.reservedIsZero)
            XCTAssertEqual(r.mtime.seconds, -0x1213_1415_1617)
            XCTAssertEqual(r.mtime.nanoseconds, 0x1819_1A1B)
            XCTAssertEqual(r.chunkTable, 0x1C1D_1E1F)
            XCTAssertEqual(r.fileID, IndexEntry.FileID(low: 0x0807_0605_0403_0201, high: 0x100F_0E0D_0C0B_0A09))
            XCTAssertFalse(r.fileIDIsZero)
        }
    }

    /// Bytes 32 … 47 by kind: the same bytes under the name of each kind.
    func testAccessors_SpanByKind() {
        let raw = RawIndexRecord(count: 7, first: 9)
        raw.withRecord { r in
            XCTAssertEqual(r.children.first, 9)
            XCTAssertEqual(r.children.count, 7)
            XCTAssertEqual(r.payload.offset, 9)
            XCTAssertEqual(r.payload.size, 7)
            XCTAssertEqual(r.target.offset, 9)
            XCTAssertEqual(r.target.length, 7)
        }
    }

    func testKind_EveryByte() {
        let table: [(UInt8, IndexEntry.Kind?)] = [(0, nil), (1, .directory), (2, .file), (3, .symlink), (4, nil), (255, nil)]
        for (byte, kind) in table {
            XCTAssertEqual(RawIndexRecord(kind: byte).withRecord { $0.kind }, kind, "kind byte \(byte)")
        }
    }

    func testInit_AtIndexFromStart() {
        let records = [RawIndexRecord(parent: 1), RawIndexRecord(parent: 2), RawIndexRecord(parent: 3)]
        let buffer = [0xEE, 0xEE, 0xEE] + records.flatMap(\.bytes)
        buffer.withUnsafeBytes { b in
            for i in 0..<3 { XCTAssertEqual(IndexRecord(in: b, at: i, from: 3).parent, i + 1) }
        }
    }

    /// What `append` writes for each kind, against the record built byte by byte.
    func testAppend_ByKind_MatchesTheLayout() {
        let table: [(IndexRecord.Body, RawIndexRecord)] = [
            (.directory(firstChild: 4, count: 3), RawIndexRecord(kind: 1, count: 3, first: 4)),
            (.file(payloadOffset: 4096, size: 10, chunkTable: nil, fileID: Self.id), RawIndexRecord(kind: 2, count: 10, first: 4096, id: Self.id)),
            (.file(payloadOffset: 0, size: 9000, chunkTable: 24, fileID: Self.id),
             RawIndexRecord(kind: 2, flags: 1, table: 24, count: 9000, first: 0, id: Self.id)),
            (.file(payloadOffset: 0, size: 9000, chunkTable: 0, fileID: Self.id),
             RawIndexRecord(kind: 2, flags: 1, table: 0, count: 9000, first: 0, id: Self.id)),
            (.symlink(targetOffset: 77, length: 5), RawIndexRecord(kind: 3, count: 5, first: 77)),
        ]
        for (i, (body, expected)) in table.enumerated() {
            var expected = expected
            (expected.parent, expected.mode, expected.nameOffset, expected.nameLength) = (2, 0o750, 11, 6)
            (expected.seconds, expected.nanoseconds) = (-5, 999_999_999)
            var out: [UInt8] = []
            IndexRecord.append(parent: 2, mode: 0o750, name: (11, 6), mtime: (-5, 999_999_999), body: body, to: &out)
            XCTAssertEqual(out, expected.bytes, "row \(i)")
        }
    }

    func testSetters_ChangeOnlyTheirField() {
        var bytes = Self.distinct.bytes
        IndexRecord.setNameOffset(0xAABB_CCDD, in: &bytes)
        IndexRecord.setTargetOffset(0x1122_3344_5566_7788, in: &bytes)
        IndexRecord.setChunkTable(0x99, in: &bytes)
        var expected = Self.distinct
        (expected.nameOffset, expected.first, expected.table) = (0xAABB_CCDD, 0x1122_3344_5566_7788, 0x99)
        XCTAssertEqual(bytes, expected.bytes)
    }

    /// `IndexEntry`: each accessor answers for its own kind, empty or 0 for the others.
    func testEntryAccessors_ByKind() {
        let table: [(UInt8, children: Range<Int>, fileSize: UInt64, payloadOffset: UInt64, targetLength: Int, targetOffset: Int)] = [
            (1, 9..<16, 0, 0, 0, 0),
            (2, 0..<0, 7, 9, 0, 0),
            (3, 0..<0, 0, 0, 7, 9),
        ]
        for row in table {
            let entry = RawIndexRecord(kind: row.0, flags: row.0 == 2 ? 1 : 0, table: 5, count: 7, first: 9, id: Self.id)
                .withRecord { IndexEntry(record: $0, position: 4) }
            XCTAssertEqual(entry.children, row.children, "kind \(row.0)")
            XCTAssertEqual(entry.fileSize, row.fileSize, "kind \(row.0)")
            XCTAssertEqual(entry.payloadOffset, row.payloadOffset, "kind \(row.0)")
            XCTAssertEqual(entry.targetLength, row.targetLength, "kind \(row.0)")
            XCTAssertEqual(entry.targetOffset, row.targetOffset, "kind \(row.0)")
            XCTAssertEqual(entry.hasChunkTable, row.0 == 2, "kind \(row.0)")
            XCTAssertEqual(entry.chunkTableOffset, 5, "kind \(row.0)")
            XCTAssertEqual(entry.position, 4)
        }
    }

    func testFlatIndexHeader_RoundTrip() {
        var out: [UInt8] = []
        FlatIndexHeader.append(entryCount: 70_000, creationTime: -3, to: &out)
        FlatIndexHeader.setStringsLength(1 << 33, in: &out)
        var expected = Array("ENCFSIDX".utf8)
        expected.appendLE(UInt32(70_000))
        expected.appendLE(UInt32(0))
        expected.appendLE(UInt64(1 << 33))
        expected.appendLE(Int64(-3))
        XCTAssertEqual(out, expected)
        let header = out.withUnsafeBytes { FlatIndexHeader($0) }
        XCTAssertTrue(header.magicMatches)
        XCTAssertEqual(header.entryCount, 70_000)
        XCTAssertTrue(header.reservedIsZero)
        XCTAssertEqual(header.stringsLength, 1 << 33)
        XCTAssertEqual(header.creationTime, -3)
        out[13] = 1
        out[0] = UInt8(ascii: "X")
        let broken = out.withUnsafeBytes { FlatIndexHeader($0) }
        XCTAssertFalse(broken.magicMatches)
        XCTAssertFalse(broken.reservedIsZero)
    }

    func testRecordPageHeader_RoundTrip() {
        var out: [UInt8] = []
        RecordPageHeader.append(firstPosition: 300, recordCount: 12, stringsLength: 999, to: &out)
        var expected: [UInt8] = []
        for value: UInt32 in [300, 12, 999, 0] { expected.appendLE(value) }
        XCTAssertEqual(out, expected)
        let header = out.withUnsafeBytes { RecordPageHeader($0) }
        XCTAssertEqual(header.firstPosition, 300)
        XCTAssertEqual(header.recordCount, 12)
        XCTAssertEqual(header.stringsLength, 999)
        XCTAssertTrue(header.reservedIsZero)
        out[15] = 1
        XCTAssertFalse(out.withUnsafeBytes { RecordPageHeader($0) }.reservedIsZero)
    }
}
