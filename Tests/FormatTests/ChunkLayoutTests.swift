@testable import EncFSCore
import XCTest
import SharedTestSupport

/// `ChunkLayout` is all the offset arithmetic of the format. Expected values
/// here come from plain division and literal numbers, or from walking the
/// bytes of a file one by one and counting, never from the function under
/// test.
final class ChunkLayoutTests: XCTestCase {
    /// (log2, chunk size, largest file size): the largest size is the literal
    /// floor(floor((2^63 − 1) / 2) / (cs + 16)) · cs, worked out by hand.
    static let layouts: [(log2: UInt8, cs: UInt64, maximum: UInt64)] = [
        (12, 4096, 4_593_741_714_853_736_448),
        (16, 65536, 4_610_560_393_331_343_360),
        (20, 1 << 20, 4_611_615_650_755_903_488),
    ]

    /// floor((2^63 − 1) / 2): a sealed body must fit below it.
    static let sealedLimit: UInt64 = 4_611_686_018_427_387_903

    // MARK: - Literal rows

    /// Hand-computed rows for 4 KiB chunks: size, chunk count, sealed size.
    func testChunkCount_LiteralRows4K() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let rows: [(size: UInt64, chunks: UInt64, sealed: UInt64)] = [
            (0, 0, 0),
            (1, 1, 17),
            (4095, 1, 4111),
            (4096, 1, 4112),
            (4097, 2, 4129),
            (8692, 3, 8740), // 2cs + 500
            (12288, 3, 12336),
            (20603, 6, 20699), // 5cs + 123
            (4_593_741_714_853_736_448, 1_121_518_973_352_963, 4_611_686_018_427_383_856),
        ]
        for row in rows {
            XCTAssertEqual(layout.chunkCount(forPlaintextSize: row.size), row.chunks, "size \(row.size)")
            XCTAssertEqual(layout.ciphertextSize(forPlaintextSize: row.size), row.sealed, "size \(row.size)")
        }
        XCTAssertEqual(layout.sealedChunkSize, 4112)
    }

    func testPlaintextRange_LiteralRows4K() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let rows: [(chunk: UInt64, size: UInt64, range: Range<UInt64>, sealedOffset: UInt64, last: Bool)] = [
            (0, 1, 0..<1, 0, true),
            (0, 4095, 0..<4095, 0, true),
            (0, 4096, 0..<4096, 0, true),
            (0, 4097, 0..<4096, 0, false),
            (1, 4097, 4096..<4097, 4112, true),
            (2, 8692, 8192..<8692, 8224, true),
            (1, 8692, 4096..<8192, 4112, false),
            (5, 20603, 20480..<20603, 20560, true),
        ]
        for row in rows {
            XCTAssertEqual(layout.plaintextRange(ofChunk: row.chunk, plaintextSize: row.size), row.range, "chunk \(row.chunk) of \(row.size)")
            XCTAssertEqual(layout.ciphertextOffset(ofChunk: row.chunk), row.sealedOffset, "chunk \(row.chunk)")
            XCTAssertEqual(layout.isLastChunk(row.chunk, plaintextSize: row.size), row.last, "chunk \(row.chunk) of \(row.size)")
            XCTAssertEqual(layout.sealedSize(ofChunk: row.chunk, plaintextSize: row.size), UInt64(row.range.count) + 16)
        }
    }

    // MARK: - Table at the boundaries, every chunk size

    /// Sizes 0, 1, cs−1, cs, cs+1, 2cs+k and around the largest size, for
    /// every function of the layout.
    func testAllFunctions_BoundaryTable() {
        for (log2, cs, maximum) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            XCTAssertEqual(layout.chunkSize, cs)
            XCTAssertEqual(layout.sealedChunkSize, cs + 16)
            let sizes: [UInt64] = [0, 1, cs - 1, cs, cs + 1, 2 * cs + 1, 2 * cs + 500, 3 * cs - 1, 3 * cs,
                                   maximum - cs - 1, maximum - cs, maximum - cs + 1, maximum - 1, maximum]
            for size in sizes {
                checkRow(layout, cs: cs, size: size)
            }
        }
    }

    private func checkRow(_ layout: ChunkLayout, cs: UInt64, size: UInt64, file: StaticString = #filePath, line: UInt = #line) {
        let what = "cs \(cs), size \(size)"
        let count = size == 0 ? 0 : (size - 1) / cs + 1
        XCTAssertEqual(layout.chunkCount(forPlaintextSize: size), count, what, file: file, line: line)
        XCTAssertEqual(layout.ciphertextSize(forPlaintextSize: size), size + 16 * count, what, file: file, line: line)
        XCTAssertTrue(layout.isValidPlaintextSize(size), what, file: file, line: line)

        // Chunks at both ends, and one past the end (an empty range there).
        var chunks: Set<UInt64> = [0, 1, count]
        if count >= 2 { chunks.insert(count - 2) }
        if count >= 1 { chunks.insert(count - 1) }
        var sealedTotal: UInt64 = 0
        for chunk in chunks.sorted() where chunk <= count {
            let start = chunk * cs
            let end = min(start + cs, max(size, start))
            XCTAssertEqual(layout.plaintextRange(ofChunk: chunk, plaintextSize: size), start..<end, "\(what), chunk \(chunk)", file: file, line: line)
            XCTAssertEqual(layout.ciphertextOffset(ofChunk: chunk), chunk * (cs + 16), "\(what), chunk \(chunk)", file: file, line: line)
            XCTAssertEqual(layout.isLastChunk(chunk, plaintextSize: size), count > 0 && chunk == count - 1, "\(what), chunk \(chunk)", file: file, line: line)
            if chunk < count {
                XCTAssertEqual(layout.sealedSize(ofChunk: chunk, plaintextSize: size), end - start + 16, "\(what), chunk \(chunk)", file: file, line: line)
            }
            if count > 0, chunk == count - 1 {
                sealedTotal = chunk * (cs + 16) + (end - start) + 16
            }
        }
        if count > 0 {
            XCTAssertEqual(sealedTotal, layout.ciphertextSize(forPlaintextSize: size), "\(what): last chunk ends the body", file: file, line: line)
        }

        // Sealed ranges of runs of chunks: a run's bytes start at its first
        // chunk and end where its last chunk's tag ends.
        XCTAssertEqual(layout.ciphertextRange(ofChunks: 0..<0, plaintextSize: size), 0..<0, what, file: file, line: line)
        let bounds: [(UInt64, UInt64)] = [(0, 1), (0, 2), (1, 3), (0, count), (count &- 2, count), (count &- 1, count)]
        for (first, end) in bounds where first < end && end <= count {
            let run = first..<end
            let lastEnd = min((run.upperBound) * cs, size)
            let expected = run.lowerBound * (cs + 16)..<((run.upperBound - 1) * (cs + 16) + (lastEnd - (run.upperBound - 1) * cs) + 16)
            XCTAssertEqual(layout.ciphertextRange(ofChunks: run, plaintextSize: size), expected, "\(what), run \(run)", file: file, line: line)
        }

        // Offsets at the boundaries.
        for offset in [0, 1, cs - 1, cs, cs + 1, 2 * cs + 500, size &- 1, size] where offset < size {
            XCTAssertEqual(layout.chunkIndex(forPlaintextOffset: offset), offset / cs, "\(what), offset \(offset)", file: file, line: line)
        }

        // Covering ranges: offsets × counts, clipped at the end of file.
        let offsets: [UInt64] = [0, 1, cs - 1, cs, cs + 1, size / 2, size &- 1, size, size &+ 1]
        let counts: [UInt64] = [0, 1, 2, cs - 1, cs, cs + 1, 2 * cs, size, UInt64.max]
        for offset in offsets {
            for n in counts {
                let got = layout.chunks(coveringPlaintextOffset: offset, count: n, plaintextSize: size)
                if offset >= size || n == 0 {
                    XCTAssertTrue(got.isEmpty, "\(what), offset \(offset), count \(n): \(got)", file: file, line: line)
                } else {
                    let lastByte = n > size - offset ? size - 1 : offset + n - 1
                    XCTAssertEqual(got, (offset / cs)..<(lastByte / cs + 1), "\(what), offset \(offset), count \(n)", file: file, line: line)
                }
            }
        }
    }

    // MARK: - The largest file

    /// The largest size is a whole number of chunks whose sealed body fits
    /// below 2^62; one more chunk would not.
    func testMaximumPlaintextSize_IsTheLargestThatFits() {
        for (log2, cs, maximum) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            XCTAssertEqual(layout.maximumPlaintextSize, maximum, "cs \(cs)")
            XCTAssertEqual(maximum % cs, 0, "cs \(cs)")
            let chunks = maximum / cs
            let sealed = maximum + 16 * chunks
            XCTAssertLessThanOrEqual(sealed, Self.sealedLimit, "cs \(cs)")
            XCTAssertGreaterThan(sealed + cs + 16, Self.sealedLimit, "cs \(cs): one more chunk would still fit")
            XCTAssertTrue(layout.isValidPlaintextSize(maximum))
            XCTAssertFalse(layout.isValidPlaintextSize(maximum + 1))
            XCTAssertFalse(layout.isValidPlaintextSize(UInt64.max))

            XCTAssertEqual(layout.chunkCount(forPlaintextSize: maximum), chunks)
            XCTAssertEqual(layout.ciphertextSize(forPlaintextSize: maximum), sealed)
            XCTAssertEqual(layout.chunkIndex(forPlaintextOffset: maximum - 1), chunks - 1)
            XCTAssertEqual(layout.plaintextRange(ofChunk: chunks - 1, plaintextSize: maximum), (maximum - cs)..<maximum)
            XCTAssertEqual(layout.ciphertextOffset(ofChunk: chunks - 1), (chunks - 1) * (cs + 16))
            XCTAssertTrue(layout.isLastChunk(chunks - 1, plaintextSize: maximum))
            XCTAssertFalse(layout.isLastChunk(chunks - 2, plaintextSize: maximum))
            XCTAssertEqual(layout.chunks(coveringPlaintextOffset: 0, count: .max, plaintextSize: maximum), 0..<chunks)
            XCTAssertEqual(layout.chunks(coveringPlaintextOffset: maximum - 1, count: .max, plaintextSize: maximum), (chunks - 1)..<chunks)
        }
    }

    /// The layout documents itself as total up to UInt64.max / 2, past the
    /// largest valid size: nothing may trap there (a trap ends the run).
    func testAllFunctions_HalfOfUInt64Max_DoNotTrap() {
        let size = UInt64.max / 2
        for (log2, cs, _) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            let count = (size - 1) / cs + 1
            XCTAssertEqual(layout.chunkCount(forPlaintextSize: size), count)
            XCTAssertEqual(layout.ciphertextSize(forPlaintextSize: size), size + 16 * count)
            XCTAssertEqual(layout.plaintextRange(ofChunk: count - 1, plaintextSize: size), ((count - 1) * cs)..<size)
            XCTAssertEqual(layout.ciphertextOffset(ofChunk: count - 1), (count - 1) * (cs + 16))
            XCTAssertEqual(layout.chunks(coveringPlaintextOffset: size - 1, count: .max, plaintextSize: size), (count - 1)..<count)
            XCTAssertFalse(layout.isValidPlaintextSize(size))
        }
    }

    // MARK: - Brute force

    /// Walks the bytes of a file one by one, numbering chunks by counting
    /// (a new chunk starts when the current one holds cs bytes), then checks
    /// every function against the walk: 4 KiB at every size up to 3cs + 100,
    /// larger chunks at every size near a boundary.
    func testAllFunctions_AgreeWithByteWalk() {
        for (log2, cs, _) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            let n = Int(3 * cs + 100)
            var chunkOf = [UInt64](repeating: 0, count: n) // chunk holding each byte
            var chunkStart: [Int] = [0] // first byte of each chunk
            var fill: UInt64 = 0
            for offset in 0..<n {
                if fill == cs {
                    chunkStart.append(offset)
                    fill = 0
                }
                chunkOf[offset] = UInt64(chunkStart.count - 1)
                fill += 1
            }
            var failures = 0
            func expect(_ ok: Bool, _ what: @autoclosure () -> String) {
                guard !ok else { return }
                failures += 1
                if failures <= 10 { XCTFail("cs \(cs): \(what())") }
            }

            let offsets = cs == 4096 ? Array(0..<n) : Self.nearBoundaries(cs: Int(cs), limit: n)
            for offset in offsets {
                expect(layout.chunkIndex(forPlaintextOffset: UInt64(offset)) == chunkOf[offset], "chunkIndex(\(offset))")
            }
            let sizes = cs == 4096 ? Array(0...n) : Self.nearBoundaries(cs: Int(cs), limit: n + 1)
            for size in sizes {
                let count = size == 0 ? 0 : Int(chunkOf[size - 1]) + 1
                let size64 = UInt64(size)
                expect(layout.chunkCount(forPlaintextSize: size64) == UInt64(count), "chunkCount(\(size))")
                var sealedOffset = 0
                for chunk in 0..<count {
                    let start = chunkStart[chunk]
                    let end = chunk + 1 < count ? chunkStart[chunk + 1] : size
                    let c = UInt64(chunk)
                    expect(layout.plaintextRange(ofChunk: c, plaintextSize: size64) == UInt64(start)..<UInt64(end), "range of chunk \(chunk), size \(size)")
                    expect(layout.isLastChunk(c, plaintextSize: size64) == (chunk == count - 1), "isLast \(chunk), size \(size)")
                    expect(layout.ciphertextOffset(ofChunk: c) == UInt64(sealedOffset), "sealed offset of chunk \(chunk)")
                    expect(layout.sealedSize(ofChunk: c, plaintextSize: size64) == UInt64(end - start + 16), "sealed size of chunk \(chunk), size \(size)")
                    sealedOffset += end - start + 16
                }
                expect(layout.ciphertextSize(forPlaintextSize: size64) == UInt64(sealedOffset), "ciphertextSize(\(size))")
                if count > 0 {
                    expect(layout.ciphertextRange(ofChunks: 0..<UInt64(count), plaintextSize: size64) == 0..<UInt64(sealedOffset),
                           "ciphertextRange of all \(count) chunks, size \(size)")
                }
            }

            // Covering ranges: the chunks of the bytes actually touched
            // (fewer rounds for large chunks: each round walks its bytes).
            var generator = SeededGenerator(seed: UInt64(log2))
            for _ in 0..<(cs == 4096 ? 400 : 20) {
                let size = Int.random(in: 0...n, using: &generator)
                let offset = Int.random(in: 0...(n + 2), using: &generator)
                let count = [0, 1, Int(cs) - 1, Int(cs), Int(cs) + 1, Int.random(in: 0...n, using: &generator)].randomElement(using: &generator)!
                var touched: Set<UInt64> = []
                var o = offset
                while o < min(offset + count, size) {
                    touched.insert(chunkOf[o])
                    o += 1
                }
                let got = layout.chunks(coveringPlaintextOffset: UInt64(offset), count: UInt64(count), plaintextSize: UInt64(size))
                expect(Set(got) == touched, "chunks(covering \(offset), count \(count), size \(size)) = \(got)")
            }
        }
    }

    /// Values within 300 of 0, cs, 2cs, 3cs and `limit`, below `limit`.
    private static func nearBoundaries(cs: Int, limit: Int) -> [Int] {
        var values: Set<Int> = []
        for boundary in [0, cs, 2 * cs, 3 * cs, limit] {
            for v in (boundary - 300)...(boundary + 300) where v >= 0 && v < limit { values.insert(v) }
        }
        return values.sorted()
    }

    // MARK: - Read plans

    /// One expected batch: its chunks, where its sealed bytes start in the
    /// source, how many there are, and its slices.
    private typealias Slice = ChunkReadPlan.Slice
    private struct ExpectedBatch: Equatable {
        var chunks: Range<UInt64>
        var sourceOffset: UInt64
        var byteCount: Int
        var slices: [Slice]
    }

    /// The plan's batches and slices, collected for comparison.
    private func walk(_ plan: ChunkReadPlan) -> [ExpectedBatch] {
        plan.map { batch in
            ExpectedBatch(chunks: batch.chunks, sourceOffset: batch.sourceOffset, byteCount: batch.byteCount, slices: Array(batch))
        }
    }

    /// Literal batch budgets: whole sealed chunks (cs + 16) that fit, at
    /// least one.
    func testChunksPerBatch_LiteralRows() {
        let rows: [(log2: UInt8, budget: Int, chunks: Int, capacity: Int)] = [
            (12, 65536, 15, 61680), // 15 · 4112 = 61680 ≤ 65536 < 16 · 4112
            (12, 8224, 2, 8224),
            (12, 8223, 1, 4112),
            (12, 4112, 1, 4112),
            (12, 4111, 1, 4112), // below one chunk: still one
            (12, 0, 1, 4112),
            (12, -1, 1, 4112),
            (13, 65536, 7, 57456), // 7 · 8208
            (16, 65536, 1, 65552),
            (20, 65536, 1, 1_048_592),
            (20, 4 << 20, 3, 3_145_776), // 4 · 1048592 > 4 MiB
        ]
        for row in rows {
            let layout = ChunkLayout(chunkSizeLog2: row.log2)
            XCTAssertEqual(layout.chunksPerBatch(batchBytes: row.budget), row.chunks, "2^\(row.log2), budget \(row.budget)")
            XCTAssertEqual(layout.batchCapacity(batchBytes: row.budget), row.capacity, "2^\(row.log2), budget \(row.budget)")
        }
    }

    /// Hand-computed plans for 4 KiB chunks in a file of 10,000 bytes
    /// (chunks 0..<3, the last one 1,808 bytes) or 20,487 bytes (5cs + 7,
    /// chunks 0..<6), sealed body at source offset 1000.
    func testReadPlan_LiteralRows4K() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let rows: [(offset: UInt64, count: Int, size: UInt64, perBatch: Int, bytes: Int, batches: [ExpectedBatch])] = [
            // Offset 0, one whole chunk: decrypted in place.
            (0, 4096, 10000, 15, 4096, [
                ExpectedBatch(chunks: 0..<1, sourceOffset: 1000, byteCount: 4112, slices: [
                    Slice(chunk: 0, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 0, count: 4096, destination: 0),
                ]),
            ]),
            // Offset 1: skip one byte of chunk 0.
            (1, 10, 10000, 15, 10, [
                ExpectedBatch(chunks: 0..<1, sourceOffset: 1000, byteCount: 4112, slices: [
                    Slice(chunk: 0, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 1, count: 10, destination: 0),
                ]),
            ]),
            // cs − 1, two bytes: the last byte of chunk 0, the first of
            // chunk 1, fetched together.
            (4095, 2, 10000, 15, 2, [
                ExpectedBatch(chunks: 0..<2, sourceOffset: 1000, byteCount: 8224, slices: [
                    Slice(chunk: 0, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 4095, count: 1, destination: 0),
                    Slice(chunk: 1, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 0, count: 1, destination: 1),
                ]),
            ]),
            // cs: chunk 1 whole; its sealed bytes start at 1000 + 4112.
            (4096, 4096, 10000, 15, 4096, [
                ExpectedBatch(chunks: 1..<2, sourceOffset: 5112, byteCount: 4112, slices: [
                    Slice(chunk: 1, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 0, count: 4096, destination: 0),
                ]),
            ]),
            // cs + 1.
            (4097, 100, 10000, 15, 100, [
                ExpectedBatch(chunks: 1..<2, sourceOffset: 5112, byteCount: 4112, slices: [
                    Slice(chunk: 1, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 1, count: 100, destination: 0),
                ]),
            ]),
            // 2cs + 500 in the short last chunk (10000 − 8192 = 1808 bytes).
            (8692, 1000, 10000, 15, 1000, [
                ExpectedBatch(chunks: 2..<3, sourceOffset: 9224, byteCount: 1824, slices: [
                    Slice(chunk: 2, chunkLength: 1808, isLastChunk: true, sealedOffset: 0, skip: 500, count: 1000, destination: 0),
                ]),
            ]),
            // Past the end of file: clipped to the 1000 bytes left.
            (9000, 4096, 10000, 15, 1000, [
                ExpectedBatch(chunks: 2..<3, sourceOffset: 9224, byteCount: 1824, slices: [
                    Slice(chunk: 2, chunkLength: 1808, isLastChunk: true, sealedOffset: 0, skip: 808, count: 1000, destination: 0),
                ]),
            ]),
            // The whole short last chunk: in place.
            (8192, 1808, 10000, 15, 1808, [
                ExpectedBatch(chunks: 2..<3, sourceOffset: 9224, byteCount: 1824, slices: [
                    Slice(chunk: 2, chunkLength: 1808, isLastChunk: true, sealedOffset: 0, skip: 0, count: 1808, destination: 0),
                ]),
            ]),
            // Empty: at end of file, past it, an empty or negative count.
            (10000, 10, 10000, 15, 0, []),
            (20000, 10, 10000, 15, 0, []),
            (5, 0, 10000, 15, 0, []),
            (5, -1, 10000, 15, 0, []),
            (0, 4096, 0, 15, 0, []),
            // Five chunks, two per batch: 100..<16484.
            (100, 16384, 20487, 2, 16384, [
                ExpectedBatch(chunks: 0..<2, sourceOffset: 1000, byteCount: 8224, slices: [
                    Slice(chunk: 0, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 100, count: 3996, destination: 0),
                    Slice(chunk: 1, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 0, count: 4096, destination: 3996),
                ]),
                ExpectedBatch(chunks: 2..<4, sourceOffset: 9224, byteCount: 8224, slices: [
                    Slice(chunk: 2, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 0, count: 4096, destination: 8092),
                    Slice(chunk: 3, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 0, count: 4096, destination: 12188),
                ]),
                ExpectedBatch(chunks: 4..<5, sourceOffset: 17448, byteCount: 4112, slices: [
                    Slice(chunk: 4, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 0, count: 100, destination: 16284),
                ]),
            ]),
            // To the end of file, two per batch: the last batch holds only
            // the 7-byte last chunk (7 + 16 sealed bytes).
            (16000, 10000, 20487, 2, 4487, [
                ExpectedBatch(chunks: 3..<5, sourceOffset: 13336, byteCount: 8224, slices: [
                    Slice(chunk: 3, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 3712, count: 384, destination: 0),
                    Slice(chunk: 4, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 0, count: 4096, destination: 384),
                ]),
                ExpectedBatch(chunks: 5..<6, sourceOffset: 21560, byteCount: 23, slices: [
                    Slice(chunk: 5, chunkLength: 7, isLastChunk: true, sealedOffset: 0, skip: 0, count: 7, destination: 4480),
                ]),
            ]),
            // The same read in one batch: the short chunk follows the others.
            (16000, 10000, 20487, 15, 4487, [
                ExpectedBatch(chunks: 3..<6, sourceOffset: 13336, byteCount: 8247, slices: [
                    Slice(chunk: 3, chunkLength: 4096, isLastChunk: false, sealedOffset: 0, skip: 3712, count: 384, destination: 0),
                    Slice(chunk: 4, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 0, count: 4096, destination: 384),
                    Slice(chunk: 5, chunkLength: 7, isLastChunk: true, sealedOffset: 8224, skip: 0, count: 7, destination: 4480),
                ]),
            ]),
        ]
        for row in rows {
            let what = "offset \(row.offset), count \(row.count), size \(row.size), \(row.perBatch) per batch"
            let plan = layout.readPlan(forPlaintextOffset: row.offset, count: row.count, plaintextSize: row.size,
                                       bodyOffset: 1000, chunksPerBatch: row.perBatch)
            XCTAssertEqual(plan.byteCount, row.bytes, what)
            XCTAssertEqual(plan.isEmpty, row.bytes == 0, what)
            XCTAssertEqual(walk(plan), row.batches, what)
        }
    }

    /// Literal rows for the slice ranges the reader uses directly.
    func testReadPlanSlice_Ranges() {
        let slice = Slice(chunk: 3, chunkLength: 4096, isLastChunk: false, sealedOffset: 4112, skip: 3712, count: 384, destination: 0)
        XCTAssertEqual(slice.sealedRange, 4112..<8224)
        XCTAssertEqual(slice.plaintextRange, 3712..<4096)
        XCTAssertEqual(slice.destinationRange, 0..<384)
        XCTAssertFalse(slice.coversWholeChunk)
        let whole = Slice(chunk: 5, chunkLength: 7, isLastChunk: true, sealedOffset: 8224, skip: 0, count: 7, destination: 4480)
        XCTAssertEqual(whole.sealedRange, 8224..<8247)
        XCTAssertEqual(whole.plaintextRange, 0..<7)
        XCTAssertEqual(whole.destinationRange, 4480..<4487)
        XCTAssertTrue(whole.coversWholeChunk)
    }

    /// A short fetch names the first chunk it did not bring whole.
    func testReadPlanBatch_FirstIncompleteChunk() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let plan = layout.readPlan(forPlaintextOffset: 3 * 4096, count: 3 * 4096, plaintextSize: 10 * 4096, chunksPerBatch: 15)
        guard let batch = plan.first(where: { _ in true }) else { return XCTFail("no batch") }
        XCTAssertEqual(batch.chunks, 3..<6)
        let rows: [(fetched: Int, chunk: UInt64)] = [(0, 3), (1, 3), (4111, 3), (4112, 4), (8223, 4), (8224, 5), (12335, 5), (-1, 3)]
        for row in rows {
            XCTAssertEqual(batch.firstIncompleteChunk(fetched: row.fetched), row.chunk, "fetched \(row.fetched)")
        }
    }

    /// The slices of every plan tile the requested range exactly, checked
    /// against literal arithmetic for every chunk size, several batch sizes
    /// and offsets and counts at the boundaries: destinations run from 0
    /// without gap or overlap, each slice's bytes are the file bytes at
    /// offset + destination, batches hold consecutive chunks, as many as the
    /// budget allows, and their sealed bytes are exactly their chunks'.
    func testReadPlan_SlicesTileTheRange() {
        for (log2, cs, _) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            let sealed = cs + 16
            let sizes: [UInt64] = [0, 1, cs - 1, cs, cs + 1, 2 * cs + 500, 3 * cs, 5 * cs + 123]
            for budget in [0, Int(sealed) - 1, Int(sealed), 2 * Int(sealed) + 1, 64 << 10, 1 << 20, 3 << 20] {
                let perBatch = UInt64(max(1, budget / Int(sealed)))
                for size in sizes {
                    let offsets: [UInt64] = [0, 1, cs - 1, cs, cs + 1, 2 * cs + 500, size / 2, size &- 1, size, size + 1]
                    let counts: [Int] = [0, 1, 2, Int(cs) - 1, Int(cs), Int(cs) + 1, 3 * Int(cs) + 7, Int(size), .max]
                    for offset in offsets {
                        for count in counts {
                            checkTiling(layout, cs: cs, size: size, offset: offset, count: count, perBatch: perBatch,
                                        budget: budget, body: 4096)
                        }
                    }
                }
            }
        }
    }

    /// Reads near the end of the largest file: nothing wraps, the last chunk
    /// is marked last, and sealed offsets stay exact with a body offset.
    func testReadPlan_LargestFileSize() {
        for (log2, cs, maximum) in Self.layouts {
            let layout = ChunkLayout(chunkSizeLog2: log2)
            let chunks = maximum / cs
            for offset in [maximum - 1, maximum - cs, maximum - cs - 1, maximum - 2 * cs - 500] {
                for count in [1, Int(cs), 3 * Int(cs), .max] {
                    checkTiling(layout, cs: cs, size: maximum, offset: offset, count: count, perBatch: 2,
                                budget: 2 * Int(cs + 16), body: 1 << 30)
                }
            }
            // The whole file at once: every byte, first batch at the body.
            let plan = layout.readPlan(forPlaintextOffset: 0, count: .max, plaintextSize: maximum, bodyOffset: 1 << 30, chunksPerBatch: 15)
            XCTAssertEqual(plan.byteCount, Int(maximum))
            XCTAssertEqual(plan.chunks, 0..<chunks)
            var batches = plan.makeIterator()
            let first = batches.next()
            XCTAssertEqual(first?.chunks, 0..<15)
            XCTAssertEqual(first?.sourceOffset, 1 << 30)
            XCTAssertEqual(first?.byteCount, 15 * Int(cs + 16))
            // At the very end: the last chunk, whole.
            let last = layout.readPlan(forPlaintextOffset: maximum - cs, count: .max, plaintextSize: maximum,
                                       bodyOffset: 1 << 30, chunksPerBatch: 15)
            XCTAssertEqual(walk(last), [ExpectedBatch(chunks: (chunks - 1)..<chunks, sourceOffset: (1 << 30) + (chunks - 1) * (cs + 16),
                                                      byteCount: Int(cs + 16), slices: [
                                                          Slice(chunk: chunks - 1, chunkLength: Int(cs), isLastChunk: true, sealedOffset: 0,
                                                                skip: 0, count: Int(cs), destination: 0),
                                                      ])])
        }
    }

    /// Byte for byte: "decrypting" each chunk of a file whose byte i is
    /// i mod 251 and copying every slice as the reader does gives exactly
    /// the requested bytes, for random offsets, counts and batch sizes.
    func testReadPlan_CopiesTheRequestedBytes() {
        let layout = ChunkLayout(chunkSizeLog2: 12)
        let cs = 4096
        let fileSize = 5 * cs + 123
        let file = (0..<fileSize).map { UInt8($0 % 251) }
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<2000 {
            let size = Int.random(in: 0...fileSize, using: &generator)
            let offset = Int.random(in: 0...(size + 2), using: &generator)
            let count = Int.random(in: 0...(3 * cs), using: &generator)
            let perBatch = Int.random(in: 1...4, using: &generator)
            let plan = layout.readPlan(forPlaintextOffset: UInt64(offset), count: count, plaintextSize: UInt64(size),
                                       chunksPerBatch: perBatch)
            var buffer = [UInt8](repeating: 0xEE, count: count)
            for batch in plan {
                for slice in batch {
                    let start = Int(slice.chunk) * cs
                    let plain = Array(file[start..<(start + slice.chunkLength)])
                    buffer.replaceSubrange(slice.destinationRange, with: plain[slice.plaintextRange])
                }
            }
            let expected = offset < size ? Array(file[offset..<min(size, offset + count)]) : []
            XCTAssertEqual(plan.byteCount, expected.count, "offset \(offset), count \(count), size \(size)")
            XCTAssertEqual(Array(buffer.prefix(plan.byteCount)), expected, "offset \(offset), count \(count), size \(size)")
            XCTAssertTrue(buffer.dropFirst(plan.byteCount).allSatisfy { $0 == 0xEE }, "wrote past the range")
        }
    }

    /// Walks one plan and checks it against literal arithmetic (see
    /// ``testReadPlan_SlicesTileTheRange()``); plans over more than 64
    /// chunks are checked at their ends only.
    private func checkTiling(_ layout: ChunkLayout, cs: UInt64, size: UInt64, offset: UInt64, count: Int,
                             perBatch: UInt64, budget: Int, body: UInt64,
                             file: StaticString = #filePath, line: UInt = #line) {
        let what = "cs \(cs), size \(size), offset \(offset), count \(count), \(perBatch) per batch"
        let sealed = cs + 16
        let expected: UInt64 = offset >= size || count <= 0 ? 0 : min(UInt64(count), size - offset)
        let plan = layout.readPlan(forPlaintextOffset: offset, count: count, plaintextSize: size, bodyOffset: body,
                                   chunksPerBatch: layout.chunksPerBatch(batchBytes: budget))
        XCTAssertEqual(plan.chunksPerBatch, perBatch, what, file: file, line: line)
        XCTAssertEqual(UInt64(plan.byteCount), expected, what, file: file, line: line)
        guard expected > 0 else {
            XCTAssertTrue(plan.isEmpty, what, file: file, line: line)
            XCTAssertNil(plan.first(where: { _ in true }), what, file: file, line: line)
            return
        }
        let firstChunk = offset / cs
        let lastChunk = (offset + expected - 1) / cs
        let fileLastChunk = (size - 1) / cs
        XCTAssertEqual(plan.chunks, firstChunk..<(lastChunk + 1), what, file: file, line: line)
        guard lastChunk - firstChunk < 64 else { return }
        var nextChunk = firstChunk
        var filled: UInt64 = 0
        var batchCount = 0
        for batch in plan {
            batchCount += 1
            XCTAssertEqual(batch.chunks.lowerBound, nextChunk, "\(what): batches are consecutive", file: file, line: line)
            let isFinal = batch.chunks.upperBound == lastChunk + 1
            XCTAssertEqual(UInt64(batch.chunks.count), isFinal ? min(perBatch, lastChunk + 1 - nextChunk) : perBatch,
                           "\(what): batch \(batch.chunks)", file: file, line: line)
            XCTAssertEqual(batch.sourceOffset, body + batch.chunks.lowerBound * sealed, what, file: file, line: line)
            XCTAssertLessThanOrEqual(batch.byteCount, layout.batchCapacity(batchBytes: budget), what, file: file, line: line)
            var sealedEnd = 0
            for slice in batch {
                XCTAssertEqual(slice.chunk, nextChunk, what, file: file, line: line)
                let chunkLength = min(cs, size - slice.chunk * cs)
                XCTAssertEqual(UInt64(slice.chunkLength), chunkLength, "\(what), chunk \(slice.chunk)", file: file, line: line)
                XCTAssertEqual(slice.isLastChunk, slice.chunk == fileLastChunk, "\(what), chunk \(slice.chunk)", file: file, line: line)
                XCTAssertEqual(slice.sealedOffset, sealedEnd, "\(what), chunk \(slice.chunk): sealed chunks are back to back", file: file, line: line)
                XCTAssertEqual(UInt64(slice.sealedOffset), (slice.chunk - batch.chunks.lowerBound) * sealed, what, file: file, line: line)
                XCTAssertEqual(slice.sealedRange.count, Int(chunkLength) + 16, what, file: file, line: line)
                XCTAssertEqual(UInt64(slice.destination), filled, "\(what), chunk \(slice.chunk): no gap, no overlap", file: file, line: line)
                XCTAssertEqual(slice.chunk * cs + UInt64(slice.skip), offset + UInt64(slice.destination),
                               "\(what), chunk \(slice.chunk): the bytes at offset + destination", file: file, line: line)
                XCTAssertGreaterThan(slice.count, 0, what, file: file, line: line)
                XCTAssertLessThanOrEqual(slice.skip + slice.count, slice.chunkLength, what, file: file, line: line)
                XCTAssertEqual(slice.coversWholeChunk, slice.skip == 0 && slice.count == slice.chunkLength, what, file: file, line: line)
                sealedEnd = slice.sealedRange.upperBound
                filled += UInt64(slice.count)
                nextChunk += 1
            }
            XCTAssertEqual(sealedEnd, batch.byteCount, "\(what): the batch is exactly its chunks", file: file, line: line)
        }
        XCTAssertEqual(nextChunk, lastChunk + 1, what, file: file, line: line)
        XCTAssertEqual(filled, expected, "\(what): slices fill the range", file: file, line: line)
        XCTAssertEqual(UInt64(batchCount), (lastChunk - firstChunk) / perBatch + 1, what, file: file, line: line)
    }
}

