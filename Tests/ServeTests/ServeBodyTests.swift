import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's bodies: large ones decrypted ahead of the sender on the
/// read-ahead threads (slots of 128 KiB, several per body), small ones
/// decrypted whole before the headers; exact bytes across slot
/// boundaries, a damaged chunk deep in a file, many downloads at once and
/// the memory they take.
final class ServeBodyTests: ServeTestCase {
    var source = ""
    var key = ""
    /// Bytes of large.bin: many slots and an odd tail.
    let largeSize = 3 * 1024 * 1024 + 12_345

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = work + "/src"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try randomFile(source + "/large.bin", size: largeSize)
        try randomFile(source + "/small.bin", size: 4096)
        key = try makeKey()
    }

    /// Writes `size` random bytes to `path`.
    func randomFile(_ path: String, size: Int) throws {
        let made = try execute("/bin/sh", ["-c", "head -c \(size) /dev/urandom > \"$0\"", path])
        XCTAssertEqual(made.status, 0, made.errorText)
    }

    /// The bytes of a file of the source directory.
    func contents(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: source + "/" + name))
    }

    func testLargeFile_ExactAcrossSlotBoundariesWholeAndInRanges() throws {
        let bundle = try pack(source, key: key)
        let server = try serve([bundle, "--key-file", key])
        let large = try contents("large.bin")
        let whole = try curl(server.url + "large.bin")
        XCTAssertEqual(whole.curlStatus, 0)
        XCTAssertEqual(whole.body.count, large.count)
        XCTAssertTrue(whole.body == large, "the whole file, byte for byte")
        // Ranges that start and end off every boundary (4 KiB chunks,
        // 128 KiB slots), and one that ends at the last byte.
        let slot = 128 * 1024
        for (first, last) in [(1, slot - 1), (slot - 7, 5 * slot + 3), (3 * slot + 4095, large.count - 1), (200_001, 1_500_002)] {
            let part = try curl(server.url + "large.bin", ["-r", "\(first)-\(last)"])
            XCTAssertEqual(part.status, 206)
            XCTAssertTrue(part.body == large[first...last], "bytes \(first)-\(last)")
        }
        XCTAssertTrue(try curl(server.url + "small.bin").body == (try contents("small.bin")))
        XCTAssertEqual(server.log, "", "nothing logged")
    }

    func testDamagedChunkDeep_AbortsAfterTheBytesBeforeIt() throws {
        // Only large.bin: the bundle is almost all its chunks, and three
        // quarters of the way into the bundle is a chunk about three
        // quarters into the file, slots past the first ones read ahead.
        try FileManager.default.removeItem(atPath: source + "/small.bin")
        let bundle = try pack(source, key: key)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: bundle))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size * 3 / 4)
        let byte = try XCTUnwrap(handle.readData(ofLength: 1).first)
        try handle.seek(toOffset: size * 3 / 4)
        handle.write(Data([byte ^ 0x01]))
        try handle.close()

        let server = try serve([bundle, "--key-file", key])
        let large = try contents("large.bin")
        let reply = try curl(server.url + "large.bin")
        XCTAssertEqual(reply.status, 200, "headers went out before the damage was found")
        XCTAssertNotEqual(reply.curlStatus, 0, "the response ends short of Content-Length")
        XCTAssertLessThan(reply.body.count, large.count)
        XCTAssertGreaterThan(reply.body.count, large.count / 2, "the bytes before the damaged range went out")
        XCTAssertTrue(reply.body == large.prefix(reply.body.count), "never a wrong byte")
        // A range before the damage is whole; the server goes on.
        let early = try curl(server.url + "large.bin", ["-r", "0-400000"])
        XCTAssertEqual(early.curlStatus, 0)
        XCTAssertTrue(early.body == large[0...400_000])
        let line = server.log.split(separator: "\n").first { $0.contains("failed authentication") }
        XCTAssertNotNil(line, server.log)
        XCTAssertTrue(line?.contains("of inode 2 failed authentication, response aborted") ?? false, server.log)
        // The chunk named is the damaged one: about three quarters in.
        let chunk = line.flatMap { $0.split(separator: " ").drop { $0 != "chunk" }.dropFirst().first }.flatMap { Int($0) }
        let chunks = (large.count + 4095) / 4096
        XCTAssertTrue((chunks / 2..<chunks).contains(chunk ?? -1), "chunk \(chunk ?? -1) of \(chunks): \(server.log)")
    }

    func testDamagedSmallFile_Answered500AndLogged() throws {
        try FileManager.default.removeItem(atPath: source + "/large.bin")
        let bundle = try pack(source, key: key)
        // The bundle is almost all small.bin's one chunk: its middle is in it.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: bundle))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        let byte = try XCTUnwrap(handle.readData(ofLength: 1).first)
        try handle.seek(toOffset: size / 2)
        handle.write(Data([byte ^ 0x01]))
        try handle.close()
        let verify = try execute(tool("encfs-inspect"), ["verify", bundle, "--key-file", key, "--quiet"])
        XCTAssertEqual(verify.status, 1, "the flipped byte must be in a chunk")

        let server = try serve([bundle, "--key-file", key])
        let reply = try curl(server.url + "small.bin")
        XCTAssertEqual(reply.status, 500, "found before the headers: no 200 with a short body")
        XCTAssertEqual(reply.body.count, 0)
        XCTAssertTrue(server.log.contains("chunk 0 of inode 2 failed authentication, answered 500"), server.log)
    }

    func testEightDownloadsAtOnce_ExactBytesAndBoundedMemory() throws {
        // 48 MiB: a server that kept bodies whole would pass 32 MiB with
        // one download.
        try randomFile(source + "/huge.bin", size: 48 * 1024 * 1024)
        let bundle = try pack(source, key: key)
        let server = try serve([bundle, "--key-file", key])
        let script = """
        for i in 1 2 3 4 5 6 7 8; do curl -sS -o "$1/got-$i" "$2" & done
        wait
        for i in 1 2 3 4 5 6 7 8; do cmp "$1/got-$i" "$3" || exit 1; rm -f "$1/got-$i"; done
        """
        let run = try execute("/bin/sh", ["-c", script, "sh", work, server.url + "huge.bin", source + "/huge.bin"], timeout: 300)
        XCTAssertEqual(run.status, 0, "every download byte-identical: \(run.text) \(run.errorText)")
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { Int($0) }
        let kib = try XCTUnwrap(peak, status)
        XCTAssertLessThanOrEqual(kib, 32 * 1024, "peak RSS \(kib) KiB with 8 downloads of a 48 MiB file (issue 28: ≤ 32 MiB)")
        XCTAssertEqual(server.log, "")
    }
}
