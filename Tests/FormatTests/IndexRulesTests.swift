@testable import EncFSCore
import XCTest

/// One table per rule of `IndexRules`: each row a record (built byte by
/// byte, `RawIndexRecord`) or a set of records, and the violation it
/// reports, nil when it passes. The messages are the ones the broken
/// fixtures pin (GoldenBundleTests).
final class IndexRulesTests: XCTestCase {
    private static let id = [UInt8](repeating: 7, count: 16)

    // MARK: - One record

    func testKind() {
        let table: [(UInt8, String?)] = [
            (0, "entry 7 has unknown kind 0"), (1, nil), (2, nil), (3, nil), (4, "entry 7 has unknown kind 4"),
            (255, "entry 7 has unknown kind 255"),
        ]
        for (byte, expected) in table {
            let got = RawIndexRecord(kind: byte).withRecord { r in violation { _ = try IndexRules.kind(of: r, position: 7) } }
            XCTAssertEqual(got, expected, "kind byte \(byte)")
        }
    }

    func testReserved() {
        let bad = "entry 7 has non-zero reserved bytes"
        // (kind, compressed bundle, flags, table offset, bytes 14 … 15) → has a table, or the violation
        let table: [(IndexEntry.Kind, Bool, UInt8, UInt32, UInt16, Result<Bool, IndexRules.Violation>)] = [
            (.file, true, 1, 8, 0, .success(true)),
            (.file, true, 1, 0, 0, .success(true)),
            (.file, true, 0, 0, 0, .success(false)),
            (.file, false, 0, 0, 0, .success(false)),
            (.directory, false, 0, 0, 0, .success(false)),
            (.file, false, 1, 8, 0, .failure(.init(bad))),
            (.file, true, 2, 8, 0, .failure(.init(bad))),
            (.file, true, 3, 8, 0, .failure(.init(bad))),
            (.file, true, 0, 8, 0, .failure(.init(bad))),
            (.directory, true, 1, 0, 0, .failure(.init(bad))),
            (.symlink, true, 0, 4, 0, .failure(.init(bad))),
            (.file, true, 1, 8, 1, .failure(.init(bad))),
            (.directory, false, 0, 0, 0x8000, .failure(.init(bad))),
        ]
        for (i, (kind, compressed, flags, offset, reserved, expected)) in table.enumerated() {
            let raw = RawIndexRecord(kind: kind.rawValue, flags: flags, reserved: reserved, table: offset)
            let got = raw.withRecord { r in
                Result { () throws(IndexRules.Violation) in
                    try IndexRules.checkReserved(r, kind: kind, compressed: compressed, position: 7) == .chunkTable
                }
            }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testMode() {
        let table: [(UInt16, String?)] = [(0, nil), (0o644, nil), (0o7777, nil), (0o10000, "entry 7 has invalid mode bits"),
                                         (0xFFFF, "entry 7 has invalid mode bits")]
        for (mode, expected) in table {
            XCTAssertEqual(RawIndexRecord(mode: mode).withRecord { r in violation { try IndexRules.checkMode(r, position: 7) } },
                           expected, "mode \(String(mode, radix: 8))")
        }
    }

    func testTime() {
        let table: [(UInt32, String?)] = [(0, nil), (999_999_999, nil), (1_000_000_000, "entry 7 has invalid nanoseconds"),
                                         (.max, "entry 7 has invalid nanoseconds")]
        for (nanoseconds, expected) in table {
            let got = RawIndexRecord(nanoseconds: nanoseconds).withRecord { r in violation { try IndexRules.checkTime(r, position: 7) } }
            XCTAssertEqual(got, expected, "nanoseconds \(nanoseconds)")
        }
    }

    func testPlacement() {
        let root = RawIndexRecord(parent: 0, kind: 1, nameOffset: 0, nameLength: 0)
        let malformed = "root entry is malformed"
        // (record, its kind, position) → violation
        var table: [(RawIndexRecord, IndexEntry.Kind, Int, String?)] = [(root, .directory, 0, nil)]
        var r = root
        r.parent = 1
        table.append((r, .directory, 0, malformed))
        table.append((root, .file, 0, malformed))
        r = root
        r.nameLength = 1
        table.append((r, .directory, 0, malformed))
        r = root
        r.nameOffset = 1
        table.append((r, .directory, 0, malformed))
        table += [
            (RawIndexRecord(parent: 0), .file, 1, nil),
            (RawIndexRecord(parent: 2), .file, 3, nil),
            (RawIndexRecord(parent: 3), .file, 3, "entry 3 comes before its parent"),
            (RawIndexRecord(parent: 4), .directory, 3, "entry 3 comes before its parent"),
        ]
        for (i, (raw, kind, position, expected)) in table.enumerated() {
            let got = raw.withRecord { r in violation { try IndexRules.checkPlacement(r, kind: kind, position: position) } }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testNameRange() {
        let bad = "entry 7 has an invalid name"
        // (offset, length, strings length) → range or violation
        let table: [(UInt32, UInt16, UInt64, Range<Int>?)] = [
            (0, 1, 1, 0..<1), (0, 0, 10, nil), (4, 255, 259, 4..<259), (0, 256, 1000, nil), (9, 1, 10, 9..<10),
            (9, 2, 10, nil), (10, 1, 10, nil), (.max, 1, 10, nil), (.max, .max, .max, nil),
        ]
        for (i, (offset, length, stringsLength, expected)) in table.enumerated() {
            let got = RawIndexRecord(nameOffset: offset, nameLength: length).withRecord { r in
                Result { () throws(IndexRules.Violation) in try IndexRules.nameRange(of: r, position: 7, stringsLength: stringsLength) }
            }
            XCTAssertEqual(got, expected.map { .success($0) } ?? .failure(.init(bad)), "row \(i)")
        }
    }

    func testNameBytes() {
        let bad = "entry 7 has an invalid name"
        let table: [([UInt8], String?)] = [
            (Array("a".utf8), nil), (Array(".a".utf8), nil), (Array("...".utf8), nil), (Array("a.".utf8), nil),
            ([0xFF, 0xFE], nil), (Array(".".utf8), bad), (Array("..".utf8), bad), (Array("a/b".utf8), bad),
            (Array("/".utf8), bad), ([0x61, 0], bad), ([0], bad),
        ]
        for (name, expected) in table {
            let got = name.withUnsafeBytes { n in violation { try IndexRules.checkNameBytes(n, position: 7) } }
            XCTAssertEqual(got, expected, "name \(name)")
        }
    }

    func testNoFileID() {
        let zero = [UInt8](repeating: 0, count: 16)
        var last = zero
        last[15] = 1
        let table: [(IndexEntry.Kind, [UInt8], String?)] = [
            (.directory, zero, nil), (.symlink, zero, nil), (.file, zero, nil), (.file, Self.id, nil),
            (.directory, Self.id, "directory 7 has a file id"), (.symlink, last, "symlink 7 has a file id"),
        ]
        for (i, (kind, id, expected)) in table.enumerated() {
            let got = RawIndexRecord(kind: kind.rawValue, id: id).withRecord { r in
                violation { try IndexRules.checkNoFileID(r, kind: kind, position: 7) }
            }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testDirectory() {
        let invalid = "directory 2 has an invalid child range"
        // (child count, first child, file id) in an index of 10 entries, at position 2
        let table: [(UInt64, UInt64, [UInt8]?, String?)] = [
            (0, 0, nil, nil), (0, 3, nil, "empty directory 2 has a child offset"), (3, 3, nil, nil), (1, 9, nil, nil),
            (3, 7, nil, nil), (3, 8, nil, invalid), (3, 2, nil, invalid), (1, 1, nil, invalid), (10, 0, nil, invalid),
            (11, 0, nil, "directory 2 has 11 children"), (.max, 1, nil, "directory 2 has \(UInt64.max) children"),
            (1, .max, nil, invalid), (0, 0, Self.id, "directory 2 has a file id"),
        ]
        for (i, (count, first, id, expected)) in table.enumerated() {
            let raw = RawIndexRecord(kind: 1, count: count, first: first, id: id ?? [UInt8](repeating: 0, count: 16))
            let got = raw.withRecord { r in violation { try IndexRules.checkDirectory(r, position: 2, entryCount: 10) } }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testFileSize() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let table: [(UInt64, String?)] = [
            (0, nil), (1 << 40, nil), (layout.maximumPlaintextSize, nil), (layout.maximumPlaintextSize + 1, "file 7 is too large"),
            (.max, "file 7 is too large"),
        ]
        for (size, expected) in table {
            let got = RawIndexRecord(count: size).withRecord { r in violation { try IndexRules.checkFileSize(r, position: 7, layout: layout) } }
            XCTAssertEqual(got, expected, "size \(size)")
        }
    }

    func testInDataRegion() {
        let outside = "file 7 lies outside the data region"
        // (offset, stored length, data length)
        let table: [(UInt64, UInt64, UInt64, String?)] = [
            (0, 0, 0, nil), (10, 5, 15, nil), (15, 0, 15, nil), (10, 6, 15, outside), (16, 0, 15, outside),
            (.max, 1, 15, outside), (1, .max, 15, outside), (0, .max, .max, nil),
        ]
        for (i, (offset, length, dataLength, expected)) in table.enumerated() {
            let got = violation { try IndexRules.checkInDataRegion(offset: offset, length: length, dataLength: dataLength, position: 7) }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testChunkTableFits() {
        // (offset, chunks, bytes available) → fits
        let table: [(UInt32, UInt64, UInt64, Bool)] = [
            (0, 2, 16, true), (0, 3, 16, false), (8, 1, 16, true), (9, 1, 16, false), (16, 0, 16, true), (17, 0, 16, false),
            (0, UInt64.max / 4, .max, false), (0, 1 << 61, .max, false), (.max, 1, .max, true),
        ]
        for (i, (offset, chunks, length, expected)) in table.enumerated() {
            XCTAssertEqual(IndexRules.chunkTableFits(offset: offset, chunks: chunks, in: length), expected, "row \(i)")
        }
    }

    func testTargetRange() {
        let bad = "symlink 7 has an invalid target"
        let longest = UInt64(BundleFormat.maximumSymlinkLength)
        // (offset, length, strings length) → range or violation
        let table: [(UInt64, UInt64, UInt64, Range<Int>?)] = [
            (0, 1, 1, 0..<1), (0, 0, 10, nil), (2, longest, longest + 2, 2..<(Int(longest) + 2)), (0, longest + 1, 1 << 20, nil),
            (9, 1, 10, 9..<10), (9, 2, 10, nil), (11, 1, 10, nil), (.max, 1, 10, nil), (1, .max, .max, nil),
        ]
        for (i, (offset, length, stringsLength, expected)) in table.enumerated() {
            let got = RawIndexRecord(kind: 3, count: length, first: offset).withRecord { r in
                Result { () throws(IndexRules.Violation) in try IndexRules.targetRange(of: r, position: 7, stringsLength: stringsLength) }
            }
            XCTAssertEqual(got, expected.map { .success($0) } ?? .failure(.init(bad)), "row \(i)")
        }
    }

    func testTargetBytes() {
        let table: [([UInt8], String?)] = [
            (Array("a".utf8), nil), (Array("/etc/passwd".utf8), nil), (Array("../x".utf8), nil),
            ([0x61, 0, 0x62], "symlink 7 target holds NUL"), ([0], "symlink 7 target holds NUL"),
        ]
        for (target, expected) in table {
            XCTAssertEqual(target.withUnsafeBytes { t in violation { try IndexRules.checkTargetBytes(t, position: 7) } }, expected,
                           "target \(target)")
        }
    }

    // MARK: - Across records

    func testBreadthFirst() {
        // (parent, previous entry's parent)
        let table: [(Int, Int, String?)] = [
            (0, -1, nil), (3, 3, nil), (4, 3, nil), (2, 3, "entry 7 is out of breadth-first order"),
            (0, 1, "entry 7 is out of breadth-first order"),
        ]
        for (i, (parent, previous, expected)) in table.enumerated() {
            XCTAssertEqual(violation { try IndexRules.checkBreadthFirst(parent: parent, after: previous, position: 7) }, expected, "row \(i)")
        }
    }

    func testMembership() {
        let outside = "entry 5 is not among its parent's children"
        // (parent is a directory, its first child, child count), at position 5
        let table: [(Bool, UInt64, UInt64, String?)] = [
            (true, 3, 3, nil), (true, 5, 1, nil), (true, 1, 5, nil), (true, 6, 3, outside), (true, 2, 3, outside),
            (true, 5, 0, outside), (false, 3, 3, outside), (true, .max, .max, outside),
        ]
        for (i, (isDirectory, first, count, expected)) in table.enumerated() {
            let got = violation { try IndexRules.checkMembership(5, parentIsDirectory: isDirectory, parentChildren: (first, count)) }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testNameOrder() {
        let bad = "entries 6 and 7 are not in name order"
        let table: [([UInt8], [UInt8], String?)] = [
            (Array("a".utf8), Array("b".utf8), nil), (Array("a".utf8), Array("ab".utf8), nil), ([], Array("a".utf8), nil),
            ([0x7F], [0x80], nil), (Array("B".utf8), Array("a".utf8), nil), (Array("b".utf8), Array("a".utf8), bad),
            (Array("a".utf8), Array("a".utf8), bad), (Array("ab".utf8), Array("a".utf8), bad), ([0x80], [0x7F], bad),
        ]
        for (i, (previous, name, expected)) in table.enumerated() {
            let got = previous.withUnsafeBytes { p in
                name.withUnsafeBytes { n in violation { try IndexRules.checkNameOrder(p, n, position: 7) } }
            }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testChildTiling() {
        // Directories in record order (position, first child, count), the entry count → violation
        let table: [([(Int, UInt64, UInt64)], Int, String?)] = [
            ([(0, 0, 0)], 1, nil),
            ([(0, 1, 2), (1, 3, 1)], 4, nil),
            ([(0, 1, 2), (1, 0, 0), (2, 3, 1)], 4, nil),
            ([(0, 1, 2), (1, 4, 1)], 5, "directory 1 has an invalid child range"),
            ([(0, 1, 2), (1, 2, 1)], 4, "directory 1 has an invalid child range"),
            ([(0, 2, 1)], 3, "directory 0 has an invalid child range"),
            ([(0, 1, 2)], 4, "directory child ranges do not cover every entry"),
            ([(0, 0, 0)], 2, "directory child ranges do not cover every entry"),
        ]
        for (i, (directories, count, expected)) in table.enumerated() {
            let got = violation {
                var tiling = IndexRules.ChildTiling()
                for (position, first, children) in directories { try tiling.add(directory: position, children: (first, children)) }
                try tiling.checkComplete(entryCount: count)
            }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testDistinctBodies() {
        let overlap = IndexRules.Violation("file data ranges overlap")
        func body(_ start: UInt64, _ size: UInt64, id: UInt8 = 1, table: UInt32 = 0) -> BodyRecord {
            RawIndexRecord(table: table, count: size, first: start, id: [UInt8](repeating: id, count: 16)).withRecord { BodyRecord($0) }
        }
        // Bodies (record, end of its stored bytes), shares allowed → (stored, plaintext) or the violation
        typealias Row = ([(body: BodyRecord, end: UInt64)], Bool, Result<(UInt64, UInt64), IndexRules.Violation>)
        let table: [Row] = [
            ([], false, .success((0, 0))),
            ([(body(0, 10), 26), (body(26, 5), 47)], false, .success((47, 15))),
            ([(body(26, 5), 47), (body(0, 10), 26)], false, .success((47, 15))),
            ([(body(0, 10), 26), (body(25, 5), 46)], false, .failure(overlap)),
            ([(body(0, 10), 26), (body(0, 10), 26)], true, .success((26, 10))),
            ([(body(0, 10), 26), (body(0, 10), 26)], false, .failure(overlap)),
            ([(body(0, 10), 26), (body(0, 11), 27)], true, .failure(overlap)),
            ([(body(0, 10), 26), (body(0, 10, id: 2), 26)], true, .failure(overlap)),
            ([(body(0, 10, table: 8), 26), (body(0, 10, table: 16), 26)], true, .failure(overlap)),
        ]
        for (i, (bodies, sharesAllowed, expected)) in table.enumerated() {
            var list = bodies
            let got = Result { () throws(IndexRules.Violation) in try IndexRules.distinctBodies(&list, sharesAllowed: sharesAllowed) }
            switch (got, expected) {
            case (.success(let a), .success(let b)): XCTAssertTrue(a.stored == b.0 && a.plaintext == b.1, "row \(i): \(a)")
            case (.failure(let a), .failure(let b)): XCTAssertEqual(a, b, "row \(i)")
            default: XCTFail("row \(i): \(got)")
            }
        }
    }
}
