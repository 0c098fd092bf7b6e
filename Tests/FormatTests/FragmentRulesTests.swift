@testable import EncFSCore
import XCTest

/// Table tests of the fragment rules (``IndexRules``: docs/FORMAT.md,
/// "Fragments"), one row per case, each with the violation it must give.
final class FragmentRulesTests: XCTestCase {
    /// Flags 2 is a slice only on a file of a bundle with fragments.
    func testReserved_FragmentSliceFlag() {
        let table: [(IndexEntry.Kind, Bool, UInt8, IndexRules.BodyForm?)] = [
            (.file, true, 2, .fragmentSlice), (.file, false, 2, nil), (.directory, true, 2, nil), (.symlink, true, 2, nil),
            (.file, true, 3, nil), (.file, true, 1, .chunkTable), (.file, true, 0, .fixed),
        ]
        for (i, (kind, fragments, flags, expected)) in table.enumerated() {
            let raw = RawIndexRecord(kind: kind.rawValue, flags: flags, table: flags == 0 ? 0 : 8)
            let got = raw.withRecord { r in
                try? IndexRules.checkReserved(r, kind: kind, compressed: true, fragments: fragments, position: 7)
            }
            XCTAssertEqual(got, expected, "row \(i)")
        }
    }

    func testFragmentSlice_SizeAndDescriptorHead() {
        let table: [(UInt64, UInt32, UInt64, String?)] = [
            (1, 0, 16, nil), (5, 100, 116, nil),
            (0, 0, 16, "file 7 is an empty fragment slice"),
            (1, 1, 16, "file 7 has a fragment outside the table stream"),
            (1, 101, 116, "file 7 has a fragment outside the table stream"),
            (1, .max, 16, "file 7 has a fragment outside the table stream"),
        ]
        for (i, (size, descriptor, stream, expected)) in table.enumerated() {
            let raw = RawIndexRecord(flags: 2, table: descriptor, count: size)
            XCTAssertEqual(raw.withRecord { r in violation { try IndexRules.checkFragmentSlice(r, position: 7, tableStreamLength: stream) } },
                           expected, "row \(i)")
        }
    }

    func testFragment_DescriptorAndSliceInside() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let outside = "file 7 lies outside its fragment"
        // (payload offset, F, slice offset, slice size, table stream length, expected); descriptor at 0.
        let table: [(UInt64, UInt64, UInt64, UInt64, UInt64, String?)] = [
            (0, 4096, 0, 4096, 24, nil), (100, 4096, 4095, 1, 24, nil), (0, 8192, 10, 10, 32, nil),
            (0, 4096, 4095, 2, 24, outside), (0, 4096, 4096, 1, 24, outside), (0, 4096, .max, 2, 24, outside),
            (0, 4096, 1, .max, 24, outside),
            (0, 0, 0, 1, 24, "file 7 has a fragment of invalid size"),
            (0, .max, 0, 1, 24, "file 7 has a fragment of invalid size"),
            (0, 8192, 0, 1, 24, "file 7 has a fragment table outside the table stream"),
            (1 << 20 + 1, 4096, 0, 1, 24, "file 7 lies outside the data region"),
        ]
        for (i, (payload, size, offset, length, stream, expected)) in table.enumerated() {
            let d = FragmentDescriptor(payloadOffset: payload, plaintextSize: size)
            XCTAssertEqual(violation {
                try IndexRules.checkFragment(d, at: 0, slice: (offset, length), position: 7, layout: layout, dataLength: 1 << 20,
                                             tableStreamLength: stream)
            }, expected, "row \(i)")
        }
    }

    func testSlicesDisjoint_UnlessIdentical() {
        let overlap = "fragment at payload offset 9 has overlapping slices"
        let table: [([(UInt64, UInt64)], String?)] = [
            ([(0, 10), (10, 5), (15, 1)], nil), ([(15, 1), (0, 10), (10, 5)], nil), ([(0, 10), (0, 10)], nil),
            ([(0, 10), (9, 5)], overlap), ([(0, 10), (0, 11)], overlap), ([(5, 1), (0, 10)], overlap),
        ]
        for (i, (slices, expected)) in table.enumerated() {
            var list = slices.map { (offset: $0.0, size: $0.1) }
            XCTAssertEqual(violation { try IndexRules.checkSlicesDisjoint(&list, fragmentAt: 9) }, expected, "row \(i)")
        }
    }
}
