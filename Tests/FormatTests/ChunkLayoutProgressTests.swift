@testable import EncFSCore
import XCTest

/// `plaintextBytes(ofChunks:plaintextSize:)`, which progress counts with:
/// a table at 0, 1, cs−1, cs, cs+1, 2cs+k, and every split of a file into
/// batches adds up to its size.
final class ChunkLayoutProgressTests: XCTestCase {
    func testPlaintextBytes_Table() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let cs = layout.chunkSize
        let rows: [(chunks: Range<UInt64>, size: UInt64, bytes: UInt64)] = [
            (0..<0, 0, 0), (0..<1, 1, 1), (0..<1, cs - 1, cs - 1), (0..<1, cs, cs), (0..<2, cs + 1, cs + 1),
            (1..<2, cs + 1, 1), (0..<1, cs + 1, cs), (2..<3, 2 * cs + 7, 7), (1..<3, 2 * cs + 7, cs + 7),
            (3..<4, 2 * cs + 7, 0),
        ]
        for row in rows {
            XCTAssertEqual(layout.plaintextBytes(ofChunks: row.chunks, plaintextSize: row.size), row.bytes, "\(row)")
        }
    }

    func testPlaintextBytes_BatchesAddUpToTheSize() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let cs = layout.chunkSize
        for size in [1, cs - 1, cs, cs + 1, 5 * cs + 3, 64 * cs] {
            let count = layout.chunkCount(forPlaintextSize: size)
            for per in [UInt64(1), 2, 3, 16] {
                var total: UInt64 = 0
                var start: UInt64 = 0
                while start < count {
                    total += layout.plaintextBytes(ofChunks: start..<min(count, start + per), plaintextSize: size)
                    start += per
                }
                XCTAssertEqual(total, size, "size \(size), \(per) per batch")
            }
        }
    }
}
