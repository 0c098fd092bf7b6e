import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The packer's output buffer writes exactly the bytes appended, at the
/// payload's offset, whether it writes directly (`O_DIRECT`: aligned blocks,
/// unaligned tails carried to the next buffer, the last block padded and
/// the file cut) or through the page cache; its digest covers what was
/// appended before ``ChunkSink/dataDigest()`` and nothing after.
///
/// Files under /var/tmp: /tmp may be a tmpfs, where `O_DIRECT` is not
/// always offered; the direct case is checked wherever this test can open
/// a file with `O_DIRECT` itself.
final class ChunkSinkTests: XCTestCase {
    private var path: [UInt8] = []

    override func setUpWithError() throws {
        var template = bytes("/var/tmp/encfs-sink-tests.XXXXXX") + [0]
        let fd = template.withUnsafeMutableBufferPointer { b in b.withMemoryRebound(to: CChar.self) { mkstemp($0.baseAddress!) } }
        guard fd >= 0 else { throw POSIXFailure("mkstemp", template) }
        close(fd)
        path = Array(template.dropLast())
    }

    override func tearDown() {
        _ = path.withCPath { unlink($0) }
    }

    func testDirect_UnalignedStartAndPieces_FileHoldsExactlyTheBytes() throws {
        try assertWrites(direct: true, start: 172, pieces: pieceSizes(seed: 1, count: 400, upTo: 70_000))
    }

    func testDirect_PiecesEndingOnABlock_NoPaddingLeft() throws {
        // 4096-byte pieces after a 4096-byte header: every hand-over is
        // aligned and the file ends on a block boundary.
        try assertWrites(direct: true, start: 4096, pieces: Array(repeating: 4096, count: 3000))
    }

    func testDirect_LessThanOneBlock_Written() throws {
        try assertWrites(direct: true, start: 100, pieces: [1, 2, 3])
    }

    func testBuffered_SameBytesAsDirect() throws {
        try assertWrites(direct: false, start: 172, pieces: pieceSizes(seed: 1, count: 400, upTo: 70_000))
    }

    func testDigest_CoversWhatWasAppendedBeforeItOnly() throws {
        let fd = try openFile()
        let sink = try ChunkSink(file: fd, startOffset: 333, hashing: true)
        let data = pattern(count: 9 << 20, seed: 7)
        let split = (5 << 20) + 123
        try sink.append(Array(data[0..<split]))
        let digest = try XCTUnwrap(try sink.dataDigest())
        try sink.append(Array(data[split...]))
        try sink.finish()
        XCTAssertEqual(digest, Array(data[0..<split]).withUnsafeBytes { SHA256.hash($0) })
        XCTAssertEqual(try contents(from: 333), data)
    }

    func testFinish_TurnsDirectWritesOffForTheHeader() throws {
        let fd = try openFile()
        let sink = try ChunkSink(file: fd, startOffset: 172)
        try sink.append(pattern(count: 10_000, seed: 3))
        try sink.finish()
        XCTAssertFalse(sink.writesDirectly)
        // An unaligned write at offset 0, as the header's, must work now.
        let header = [UInt8](repeating: 0xEE, count: 172)
        try header.withUnsafeBytes { try fd.writeAll($0, toAbsoluteOffset: 0) }
        XCTAssertEqual(Array(try contents(from: 0)[0..<172]), header)
        XCTAssertEqual(try contents(from: 172), pattern(count: 10_000, seed: 3))
    }

    // MARK: - Helpers

    private func assertWrites(direct: Bool, start: UInt64, pieces: [Int], line: UInt = #line) throws {
        let fd = try openFile()
        let sink = try ChunkSink(file: fd, startOffset: start, direct: direct)
        if direct && supportsDirectIO() {
            XCTAssertTrue(sink.writesDirectly, "O_DIRECT was not used", line: line)
        }
        if !direct { XCTAssertFalse(sink.writesDirectly, line: line) }
        var expected: [UInt8] = []
        for (i, size) in pieces.enumerated() {
            let piece = pattern(count: size, seed: UInt64(i))
            try sink.withSpace(size) { space in piece.withUnsafeBytes { space.copyMemory(from: $0) } }
            expected += piece
            XCTAssertEqual(sink.dataLength, UInt64(expected.count), line: line)
        }
        if direct && supportsDirectIO() {
            XCTAssertTrue(sink.writesDirectly, "fell back to buffered writes", line: line)
        }
        try sink.finish()
        var st = stat()
        XCTAssertEqual(fstat(fd.rawValue, &st), 0)
        XCTAssertEqual(UInt64(st.st_size), start + UInt64(expected.count), "file length", line: line)
        XCTAssertEqual(try contents(from: start), expected, line: line)
    }

    private func openFile() throws -> FileDescriptor {
        try FileDescriptor.open(path, flags: O_RDWR | O_TRUNC)
    }

    private func supportsDirectIO() -> Bool {
        let fd = path.withCPath { open($0, O_RDONLY | DirectWrites.flag) }
        if fd >= 0 { close(fd) }
        return fd >= 0
    }

    private func contents(from offset: UInt64) throws -> [UInt8] {
        Array(try FileTree.readFile(path).dropFirst(Int(offset)))
    }

    private func pieceSizes(seed: UInt64, count: Int, upTo limit: Int) -> [Int] {
        var generator = SeededGenerator(seed: seed)
        return (0..<count).map { _ in Int.random(in: 1...limit, using: &generator) }
    }

    private func pattern(count: Int, seed: UInt64) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) &+ Int(seed &* 7) &+ ($0 >> 9)) }
    }
}
