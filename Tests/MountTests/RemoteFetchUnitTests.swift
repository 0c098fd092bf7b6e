import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Where fetch units of a remote bundle begin and end, and when a cold
/// read returns: a unit fills its cell of the fetch-size grid, both ends
/// on the chunk boundaries of the read that needs it, so no chunk is split
/// between two requests; a cold read returns once its own chunks have
/// arrived, while the rest of its unit (before and after them) is still on
/// the way, and the unit's cache file appears only whole.
final class RemoteFetchUnitTests: RemoteTestCase {
    /// The `Range` headers nginx logged, as byte ranges, in order.
    private func requestedRanges(_ server: RemoteServer) throws -> [Range<UInt64>] {
        try server.accessLog().compactMap { line in
            guard line.range.hasPrefix("bytes="), let dash = line.range.firstIndex(of: "-"),
                  let first = UInt64(line.range[line.range.index(line.range.startIndex, offsetBy: 6)..<dash]),
                  let last = UInt64(line.range[line.range.index(after: dash)...]) else { return nil }
            return first..<(last + 1)
        }
    }

    /// A cold read of one chunk that straddles a 4 MiB boundary of the
    /// bundle makes one request for that chunk (a grid cut at bytes, not
    /// chunks, made two); its unit comes in at most three requests (the
    /// chunk, the bytes before and after it); a whole-file read then
    /// requests every byte once.
    func testColdChunkAcrossAFourMiBBoundary_OneRequest_WholeFileOnce() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["large.bin": 12 << 20], chunkSize: "64K")
        let bundleSize = try BundleSurgery.size(of: published.bundle)
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache, ["--fetch-size", "4M"])
        let atMount = try server.accessLog().count
        // The chunk whose sealed bytes hold bundle offset 8 MiB.
        let sealed: UInt64 = (64 << 10) + 16
        let firstChunk = try BundleSurgery.offset(ofChunk: 0, byte: 0, ofFile: "large.bin", in: published.bundle, keyFile: published.key)
        let chunk = ((8 << 20) - firstChunk) / sealed
        let chunkBytes = (firstChunk + chunk * sealed)..<(firstChunk + (chunk + 1) * sealed)
        XCTAssertTrue(chunkBytes.contains(8 << 20) && chunkBytes.lowerBound != 8 << 20, "\(chunkBytes)")
        let offset = Int(chunk) * (64 << 10) + 1000
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: offset).result,
                       try expected("\(published.source)/large.bin", offset: offset))
        // The unit's rest arrives in the background; then it is stored.
        XCTAssertTrue(Deadline.poll(seconds: 10) { ((try? self.cachedBytes(cache)) ?? 0) > 0 })
        let ranges = try requestedRanges(server).dropFirst(atMount)
        XCTAssertEqual(ranges.filter { $0.overlaps(chunkBytes) }.count, 1, "requests for the chunk \(chunkBytes): \(Array(ranges))")
        XCTAssertTrue(ranges.contains { $0.lowerBound <= chunkBytes.lowerBound && $0.upperBound >= chunkBytes.upperBound },
                      "no one request holds the chunk \(chunkBytes): \(Array(ranges))")
        XCTAssertLessThanOrEqual(ranges.count, 3, "\(Array(ranges))")
        XCTAssertLessThanOrEqual(ranges.reduce(0) { $0 + $1.count }, (4 << 20) + Int(sealed))

        // The whole file: every byte requested at most once.
        XCTAssertEqual(try sha256(mounted.path("large.bin")), try sha256("\(published.source)/large.bin"))
        let all = try requestedRanges(server).dropFirst(atMount).sorted { $0.lowerBound < $1.lowerBound }
        for (earlier, later) in zip(all, all.dropFirst()) {
            XCTAssertLessThanOrEqual(earlier.upperBound, later.lowerBound, "bytes requested twice: \(earlier) and \(later)")
        }
        let sent = try server.accessLog().reduce(0) { $0 + $1.bodyBytes }
        XCTAssertLessThanOrEqual(Double(sent), 1.01 * Double(bundleSize), "\(sent) bytes sent for a bundle of \(bundleSize)")
        // Every unit but the file's last ends on a chunk boundary.
        for unit in try unitFiles(cache) where unit.start + unit.size < firstChunk + (12 << 20) {
            XCTAssertEqual((unit.start + unit.size - firstChunk) % sealed, 0, "a unit ends inside a chunk: \(unit)")
        }
        unmount(mounted)
    }

    /// A cold 4 KiB read returns once its chunk has arrived: with the proxy
    /// capping bandwidth, it has sent a small part of the unit when the
    /// read returns (the whole unit before this change), and no cache file
    /// exists yet; the unit is stored whole later, and reading all of it
    /// again transfers nothing.
    func testColdRead_ReturnsBeforeItsUnitArrives_UnitStoredWhole() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["large.bin": 12 << 20], chunkSize: "64K")
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                      ["--fetch-size", "4M", "--net-timeout", "30"])
        // 1 MiB/s: a 4 MiB unit takes 4 s.
        try server.setFault("pass", ["bytes_per_second": String(1 << 20)])
        try server.resetProxy()
        try server.setFault("pass", ["bytes_per_second": String(1 << 20)])
        let offset = (5 << 20) + 12_345
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: offset).result,
                       try expected("\(published.source)/large.bin", offset: offset))
        let atReturn = try server.proxyStats().bytes
        let unitFilesAtReturn = try unitFiles(cache)
        XCTAssertGreaterThan(atReturn, 0)
        XCTAssertLessThan(atReturn, 1 << 20, "the cold read waited for most of its 4 MiB unit")
        XCTAssertEqual(unitFilesAtReturn.count, 0, "a cache file before the unit was whole: \(unitFilesAtReturn)")
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.unitFiles(cache).count) ?? 0) == 1 })
        let stored = try unitFiles(cache)
        XCTAssertGreaterThan(stored.first?.size ?? 0, 4_000_000, "\(stored)")
        // The whole unit is served from the cache: every chunk it holds.
        try server.setFault("pass", ["bytes_per_second": "0"])
        try dropKernelCaches()
        try server.resetProxy()
        let sealed: UInt64 = (64 << 10) + 16
        let firstChunk = try BundleSurgery.offset(ofChunk: 0, byte: 0, ofFile: "large.bin", in: published.bundle, keyFile: published.key)
        let unit = try XCTUnwrap(stored.first)
        let chunks = ((unit.start > firstChunk ? unit.start - firstChunk : 0) + sealed - 1) / sealed..<((unit.start + unit.size - firstChunk) / sealed)
        XCTAssertTrue(chunks.contains(UInt64(offset >> 16)), "the unit \(unit) lacks the chunk read")
        let plainStart = Int(chunks.lowerBound) << 16
        let plainCount = chunks.count << 16
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: plainStart, count: plainCount).result,
                       try expected("\(published.source)/large.bin", offset: plainStart, count: plainCount))
        XCTAssertEqual(try server.proxyStats().bytes, 0, "the unit's rest was not stored")
        unmount(mounted)
    }

    /// Cold random reads in one cell of the fetch-size grid share one unit:
    /// a read late in a cell makes three requests at once (its chunk, the
    /// cell's bytes before and after it; all three have reached the server
    /// when the read returns, although each waits half a second there),
    /// and a later read early in the same cell transfers nothing. Units
    /// that began at each cold read left the cell's first part to a
    /// request of its own, and asked for the rest only once the read's
    /// chunk had returned.
    func testColdReadsInOneCell_OneUnit_RequestedAtOnce() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["large.bin": 12 << 20], chunkSize: "64K")
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                      ["--fetch-size", "4M", "--net-timeout", "30"])
        // Cells of 63 sealed chunks (the most whole chunks in 4 MiB), on
        // the chunk boundaries of the file, from bundle offset 0.
        let sealed: UInt64 = (64 << 10) + 16
        let firstChunk = try BundleSurgery.offset(ofChunk: 0, byte: 0, ofFile: "large.bin", in: published.bundle, keyFile: published.key)
        let cellStart = Int(2 * 63 - firstChunk / sealed)
        try server.resetProxy()
        try server.setFault("pass", ["latency_ms": "500"])
        let late = (cellStart + 50) << 16
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: late).result,
                       try expected("\(published.source)/large.bin", offset: late))
        XCTAssertEqual(try server.proxyStats().requests, 3, "the unit's other bytes were not asked for with the read's chunk")
        XCTAssertTrue(Deadline.poll(seconds: 20) { ((try? self.unitFiles(cache).count) ?? 0) == 1 })
        try server.resetProxy()
        let early = (cellStart + 5) << 16
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: early).result,
                       try expected("\(published.source)/large.bin", offset: early))
        XCTAssertEqual(try server.proxyStats().bytes, 0, "the cell's first part was not in the first read's unit")
        unmount(mounted)
    }

    /// A compressed bundle (chunks of many lengths, several files): every
    /// file reads back exactly, cold and warm, and each byte is fetched
    /// once.
    func testCompressedBundle_ReadsExactly_EachByteFetchedOnce() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let source = try scratch.makeDirectory("src")
        _ = try sh("""
            cd "$1" && python3 -c '
            import random
            r = random.Random(7)
            for i in range(4):
                with open("f%d.bin" % i, "wb") as f:
                    for _ in range(300):
                        f.write(bytes(r.getrandbits(8) for _ in range(2000)) + b"a" * r.randrange(1, 20000))
            '
            """, [source])
        let key = try makeKeyFile(uniqueName("key"))
        try packOrThrow(source, "\(server.root)/z.encfs", keyFile: key, ["--compress", "zstd", "--chunk-size", "32K"])
        let bundleSize = try BundleSurgery.size(of: "\(server.root)/z.encfs")
        let mounted = try mountRemote(server.url("z.encfs"), key: key, ["--fetch-size", "1M"])
        let atMount = try server.accessLog().count
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<20 {
            let file = "f\(generator.next() % 4).bin"
            let offset = Int(generator.next() % 3_000_000)
            XCTAssertEqual(try pread(mounted.path(file), offset: offset, count: 20_000).result,
                           try expected("\(source)/\(file)", offset: offset, count: 20_000), "\(file) at \(offset)")
        }
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(source))
        try dropKernelCaches()
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(source))
        let all = try requestedRanges(server).dropFirst(atMount).sorted { $0.lowerBound < $1.lowerBound }
        for (earlier, later) in zip(all, all.dropFirst()) {
            XCTAssertLessThanOrEqual(earlier.upperBound, later.lowerBound, "bytes requested twice: \(earlier) and \(later)")
        }
        XCTAssertLessThanOrEqual(all.reduce(0) { $0 + $1.count }, Int(bundleSize))
        unmount(mounted)
    }
}
