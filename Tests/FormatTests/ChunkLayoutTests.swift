@testable import EncFS
import XCTest

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
}
