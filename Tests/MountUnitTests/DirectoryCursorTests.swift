@testable import EncFSMount
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The readdir offsets: 0 is ".", 1 is "..", 2 + k is child k; the offset
/// given with a name is where listing resumes after it.
final class DirectoryCursorTests: XCTestCase {
    /// Every (slot, offset handed out) from `offset` to the end.
    private func walk(from offset: off_t, children: Int) -> [(DirectoryCursor.Slot, off_t)] {
        guard var cursor = DirectoryCursor(offset: offset, childCount: children) else { return [] }
        var out: [(DirectoryCursor.Slot, off_t)] = []
        while let slot = cursor.slot {
            out.append((slot, cursor.nextOffset))
            cursor.advance()
        }
        return out
    }

    func testSlots_TableAtEveryOffsetOfThreeChildren() {
        let expected: [(off_t, DirectoryCursor.Slot?, off_t)] = [
            (0, .current, 1), (1, .parent, 2), (2, .child(0), 3), (3, .child(1), 4), (4, .child(2), 5), (5, nil, 6),
        ]
        for (offset, slot, next) in expected {
            let cursor = DirectoryCursor(offset: offset, childCount: 3)
            XCTAssertEqual(cursor?.slot, slot, "offset \(offset)")
            XCTAssertEqual(cursor?.nextOffset, next, "offset \(offset)")
        }
    }

    func testWalk_FromZeroListsDotDotDotThenEveryChildInOrder() {
        let listed = walk(from: 0, children: 4)
        XCTAssertEqual(listed.map(\.0), [.current, .parent, .child(0), .child(1), .child(2), .child(3)])
        XCTAssertEqual(listed.map(\.1), [1, 2, 3, 4, 5, 6])
    }

    func testWalk_ResumingAtAnyHandedOutOffsetNeitherRepeatsNorSkips() {
        for children in [0, 1, 2, 7] {
            let all = walk(from: 0, children: children)
            for (i, (_, next)) in all.enumerated() {
                let resumed = walk(from: next, children: children)
                XCTAssertEqual(resumed.map(\.0), all.dropFirst(i + 1).map(\.0), "\(children) children, resumed at \(next)")
            }
        }
    }

    func testEmptyDirectory_ListsOnlyDotAndDotDot() {
        XCTAssertEqual(walk(from: 0, children: 0).map(\.0), [.current, .parent])
        XCTAssertEqual(walk(from: 1, children: 0).map(\.0), [.parent])
        XCTAssertEqual(walk(from: 2, children: 0).map(\.0), [])
    }

    func testOffsetPastTheEnd_ClampsToAnEmptyListing() {
        for offset in [off_t(6), 7, 1000, off_t(Int32.max), off_t.max - 1, off_t.max] {
            let cursor = DirectoryCursor(offset: offset, childCount: 4)
            XCTAssertNotNil(cursor, "offset \(offset)")
            XCTAssertNil(cursor?.slot, "offset \(offset)")
            XCTAssertEqual(cursor?.position, 6, "offset \(offset)")
        }
    }

    func testNegativeOffset_IsRefused() {
        for offset in [off_t(-1), -2, off_t.min] {
            XCTAssertNil(DirectoryCursor(offset: offset, childCount: 3), "offset \(offset)")
        }
    }

    func testAdvance_StaysAtTheEnd() {
        guard var cursor = DirectoryCursor(offset: 2, childCount: 0) else { return XCTFail("no cursor") }
        XCTAssertNil(cursor.slot)
        cursor.advance()
        cursor.advance()
        XCTAssertNil(cursor.slot)
        XCTAssertEqual(cursor.position, 2)
    }

    func testHugeChildCount_DoesNotTrap() {
        let cursor = DirectoryCursor(offset: off_t.max, childCount: Int.max)
        XCTAssertNotNil(cursor)
        XCTAssertEqual(DirectoryCursor(offset: 5, childCount: Int.max)?.slot, .child(3))
        XCTAssertNil(DirectoryCursor(offset: 0, childCount: -1))
    }
}
