import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Remote bundles: `encfs-mount URL` and `encfs-inspect … URL` against a
/// real nginx on 127.0.0.1, through the fault proxy (Scripts/fault-proxy.py)
/// where a test counts transfers or injects faults.
///
/// Every read is checked against the source: nothing wrong is ever
/// returned, only the right bytes or EIO. Deadlines are short (2 s) and
/// files small, so the class runs in well under three minutes.
final class RemoteMountTests: RemoteTestCase {
    // MARK: - Content

    func testMount_ServesSourceExactly_SeveralChunkSizes() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        for chunkSize in ["4K", "64K", "1M"] {
            let published = try publish(server, ["a.bin": 1_500_000, "empty": 0, "small.txt": 100, "dir/b.bin": 300_000,
                                                 "dir/deeper/c.bin": 70_001], chunkSize: chunkSize, name: "\(chunkSize).encfs")
            try server.resetProxy()
            let mounted = try mountRemote(server.url("\(chunkSize).encfs"), key: published.key)
            let atMount = try server.proxyStats()
            XCTAssertLessThanOrEqual(atMount.requests, 2, "chunk size \(chunkSize): requests before the mount served")
            assertSuccess(try run("/usr/bin/diff", ["-r", published.source, mounted.mountpoint]), "diff -r, chunk size \(chunkSize)")
            XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source), "chunk size \(chunkSize)")
            var generator = SeededGenerator(seed: 42)
            for _ in 0..<20 {
                let offset = Int(generator.next() % 1_500_000)
                let count = Int(generator.next() % 70_000) + 1
                XCTAssertEqual(try pread(mounted.path("a.bin"), offset: offset, count: count).result,
                               try expected("\(published.source)/a.bin", offset: offset, count: count),
                               "pread \(count) at \(offset), chunk size \(chunkSize)")
            }
            // Warm: everything is cached; the kernel's copy is dropped.
            try dropKernelCaches()
            try server.resetProxy()
            XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
            XCTAssertEqual(try server.proxyStats().bytes, 0, "a warm re-read transferred bytes (chunk size \(chunkSize))")
            unmount(mounted)
        }
    }

    /// A remote bundle is served classic (reads waiting on the network
    /// would hold the io_uring queues); uring asked for is a usage error.
    func testTransport_RemoteServedClassic_UringRefused() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["a.bin": 50_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key)
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        let status = try check(try Tools.ctl(), [mounted.mountpoint, "status", "--json"]).output
        XCTAssertTrue(status.contains("\"transport\":\"classic\"") || status.contains("\"transport\": \"classic\""), status)
        let mountpoint = try scratch.makeDirectory("mnt-refused")
        let refused = try Subprocess.run(try Tools.mount(), [server.url("bundle.encfs"), mountpoint, "--key-file", published.key,
                                                             "--cache-dir", try scratch.makeDirectory("cache-refused"),
                                                             "--transport", "uring"])
        XCTAssertEqual(refused.status, 2, refused.summary)
        XCTAssertTrue(refused.errorOutput.hasPrefix("encfs-mount: error: --transport uring cannot serve a remote bundle"),
                      refused.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    func testInspect_ReadsURL() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["x/y.bin": 50_000])
        let url = server.url("bundle.encfs")
        let cache = ["--cache-dir", try scratch.makeDirectory("cache")]
        let listing = try check(try Tools.inspect(), ["ls", url, "x", "--key-file", published.key] + cache)
        XCTAssertEqual(listing.output, "y.bin\n")
        let cat = try run(try Tools.inspect(), ["cat", url, "x/y.bin", "--key-file", published.key] + cache)
        XCTAssertEqual(cat.stdout, [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(published.source)/x/y.bin"))))
        assertSuccess(try run(try Tools.inspect(), ["verify", url, "--key-file", published.key] + cache))
        XCTAssertTrue(try check(try Tools.inspect(), ["info", url] + cache).output.contains("bundle id:"))
        let rekey = try run(try Tools.inspect(), ["rekey", url, "--key-file", published.key])
        XCTAssertEqual(rekey.status, 2, rekey.summary)
    }

    // MARK: - Transfers and the cache

    func testTransfers_ColdPieceWholeFileAndCacheBound() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        // One large file: the bundle is that file's ciphertext and little else.
        let published = try publish(server, ["large.bin": 12 << 20], chunkSize: "64K")
        let bundleSize = try BundleSurgery.size(of: published.bundle)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "1M"])
        try server.resetProxy()
        let offset = (5 << 20) + 12_345
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: offset).result,
                       try expected("\(published.source)/large.bin", offset: offset))
        let piece = try server.proxyStats()
        XCTAssertGreaterThan(piece.bytes, 0)
        XCTAssertLessThanOrEqual(piece.bytes, 1 << 20, "a cold 4 KiB read transferred more than one fetch unit")
        try server.resetProxy()
        XCTAssertEqual(try sha256(mounted.path("large.bin")), try sha256("\(published.source)/large.bin"))
        let whole = try server.proxyStats()
        XCTAssertLessThanOrEqual(Double(whole.bytes), 1.01 * Double(bundleSize), "whole-file read: \(whole.bytes) of \(bundleSize)")
        unmount(mounted)

        // 12 MiB read through a 4 MiB cache: at most one unit over.
        let cache = try scratch.makeDirectory("small-cache")
        let small = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                    ["--fetch-size", "1M", "--cache-size", "4M"])
        XCTAssertEqual(try sha256(small.path("large.bin")), try sha256("\(published.source)/large.bin"))
        XCTAssertLessThanOrEqual(try cachedBytes(cache), (4 << 20) + (1 << 20))
        XCTAssertGreaterThan(try cachedBytes(cache), 0)
        // Ciphertext only: no 32-byte window of the plaintext is in the cache.
        let leaked = try python("""
            import os, sys
            plain = open(sys.argv[1], 'rb').read()
            cached = b''.join(open(os.path.join(d, f), 'rb').read() for d, _, fs in os.walk(sys.argv[2]) for f in fs)
            print(sum(plain[o:o + 32] in cached for o in range(0, len(plain) - 32, len(plain) // 64)))
            """, ["\(published.source)/large.bin", cache])
        XCTAssertEqual(leaked.output.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        unmount(small)
    }

    /// The issue's own figure: a 4 KiB piece of a cold 1 GiB file costs at
    /// most one fetch unit (the default 4 MiB) once mounted.
    func testTransfers_ColdPieceOfOneGiBFile() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let source = try scratch.makeDirectory("large-source")
        // Sparse: zeros, packed at the speed of the cipher.
        _ = try sh("truncate -s 1G \"$1\"/large.bin", [source])
        let key = try makeKeyFile(uniqueName("key"))
        try packOrThrow(source, "\(server.root)/large.encfs", keyFile: key)
        let cache = try scratch.makeDirectory(uniqueName("cache"))
        try server.resetProxy()
        let mounted = try mount(server.url("large.encfs"), keyArguments: ["--key-file", key], options: ["--cache-dir", cache])
        XCTAssertLessThanOrEqual(try server.proxyStats().requests, 2)
        try server.resetProxy()
        let read = try pread(mounted.path("large.bin"), offset: (700 << 20) + 12_345)
        XCTAssertEqual(read.result, try expected("\(source)/large.bin", offset: (700 << 20) + 12_345))
        let piece = try server.proxyStats()
        XCTAssertGreaterThan(piece.bytes, 0)
        XCTAssertLessThanOrEqual(piece.bytes, 4 << 20, "a cold 4 KiB read of a 1 GiB file transferred more than one fetch unit")
        unmount(mounted)
    }

    func testCache_DamagedUnitIsFetchedAgain_SecondDaemonRefused() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["f.bin": 1 << 20, "g.bin": 200_000])
        let cache = try scratch.makeDirectory("cache")
        let url = server.url("bundle.encfs")
        var mounted = try mountRemote(url, key: published.key, cache: cache)
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        // A second daemon on the same cache directory is refused.
        let other = try scratch.makeDirectory("mnt-other")
        let second = try run(try Tools.mount(), [url, other, "--key-file", published.key, "--cache-dir", cache])
        XCTAssertEqual(second.status, 1, second.summary)
        XCTAssertTrue(second.errorOutput.contains("in use by another encfs process"), second.errorOutput)
        XCTAssertFalse(MountTable.isMounted(other))
        unmount(mounted)

        // Alter one unit file and cut another short.
        let units = try sh("find \"$1\" -name 'unit-*' -type f | sort", [cache]).output.split(separator: "\n").map(String.init)
        XCTAssertGreaterThanOrEqual(units.count, 2)
        try BundleSurgery.flipByte(at: 1000, in: units[1])
        try BundleSurgery.truncate(units[2 % units.count], to: 100)
        mounted = try mountRemote(url, key: published.key, cache: cache)
        try server.resetProxy()
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source), "a damaged cache file was served")
        let refetched = try server.proxyStats()
        XCTAssertGreaterThan(refetched.bytes, 0, "damaged units must be fetched again")
        XCTAssertLessThanOrEqual(refetched.bytes, 2 * (256 << 10))
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    /// A unit file damaged in place while the mount keeps it open: the
    /// damaged bytes fail authentication, the unit is fetched again and
    /// its new file is read, never the descriptor of the old one.
    ///
    /// A unit fetched again may still be arriving when the read returns
    /// (its bytes past the read's were served from the old file by other
    /// workers): the test waits, bounded, until the cache covers again all
    /// it covered before, so that no fetch of this read lands in the next
    /// one's count.
    func testCache_UnitDamagedWhileOpen_IsFetchedAgain() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["f.bin": 1 << 20])
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache)
        let digest = try sha256("\(published.source)/f.bin")
        XCTAssertEqual(try sha256(mounted.path("f.bin")), digest)
        let units = try unitFiles(cache)
        XCTAssertGreaterThanOrEqual(units.count, 3)
        /// The bytes the unit files hold, as ranges merged where they meet.
        func covered() -> [Range<UInt64>] {
            ((try? unitFiles(cache)) ?? []).reduce(into: []) { ranges, unit in
                let range = unit.start..<(unit.start + unit.size)
                if let last = ranges.last, last.upperBound == range.lowerBound {
                    ranges[ranges.count - 1] = last.lowerBound..<range.upperBound
                } else {
                    ranges.append(range)
                }
            }
        }
        let coveredBefore = covered()
        // A byte in the first chunk of each unit (or its middle, when short).
        for unit in units { try BundleSurgery.flipByte(at: min(100, unit.size / 2), in: unit.path) }
        try dropKernelCaches()
        try server.resetProxy()
        XCTAssertEqual(try sha256(mounted.path("f.bin")), digest, "a damaged cache file was served")
        XCTAssertTrue(Deadline.poll(seconds: 10) { covered() == coveredBefore },
                      "the units fetched again were not all stored: \(covered()) against \(coveredBefore)")
        XCTAssertGreaterThan(try server.proxyStats().bytes, 0, "damaged units must be fetched again")
        // The fresh files are the ones read now: nothing more is fetched.
        try dropKernelCaches()
        try server.resetProxy()
        XCTAssertEqual(try sha256(mounted.path("f.bin")), digest)
        XCTAssertEqual(try server.proxyStats().bytes, 0)
        unmount(mounted)
    }

    /// A sequential reader gets the next two units fetched ahead, and
    /// once they are cached, their files read ahead into the page cache
    /// (the kernel's own read-ahead ends with each unit file); units far
    /// ahead are left alone.
    ///
    /// Each phase has a daemon of its own, on the same cache: what a phase
    /// leaves is looked at once its daemon has ended, so no fetch or page
    /// cache read still running in the background (on a loaded machine
    /// they lag behind the reader) can land after the look, or after the
    /// page cache was dropped.
    func testCache_SequentialReadsReadNextUnitsAhead() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["big.bin": 4 << 20])
        let cache = try scratch.makeDirectory("cache")
        // 1 MiB in 64 KiB preads, the kernel's read-ahead off.
        func readFirstMiB(_ mounted: MountedBundle) throws {
            try check(Tools.python, ["-c", """
                import os, sys
                fd = os.open(sys.argv[1], os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                for offset in range(0, 1 << 20, 1 << 16):
                    os.pread(fd, 1 << 16, offset)
                """, mounted.path("big.bin")], timeout: 120)
        }
        // Where the last read's chunks end in the bundle (8 KiB chunks).
        let lastReadEnd = try BundleSurgery.offset(ofChunk: 127, byte: 8192 + 16, ofFile: "big.bin", in: published.bundle,
                                                   keyFile: published.key)
        // Units are 31 chunks (the most whole chunks in 256 KiB).
        let unit: UInt64 = 31 * (8192 + 16)
        // Cold: the unit holding the last read ends before lastReadEnd +
        // unit; the two after it are fetched ahead, none further.
        let cold = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache)
        try readFirstMiB(cold)
        /// How far the units stored from the start cover the bundle.
        func coveredEnd() -> UInt64 {
            var end: UInt64 = 0
            for stored in (try? unitFiles(cache)) ?? [] where stored.start <= end || end == 0 { end = max(end, stored.start + stored.size) }
            return end
        }
        XCTAssertTrue(Deadline.poll(seconds: 60) { coveredEnd() >= lastReadEnd + 2 * unit },
                      "\(lastReadEnd): \((try? unitFiles(cache))?.map { "\($0.start)+\($0.size)" } ?? [])")
        unmount(cold)
        XCTAssertFalse(try unitFiles(cache).contains { $0.start >= lastReadEnd + 3 * unit }, "a unit far ahead was fetched")
        // Every unit cached, by a daemon that has ended since.
        let whole = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache)
        XCTAssertEqual(try sha256(whole.path("big.bin")), try sha256("\(published.source)/big.bin"))
        unmount(whole)
        // Warm: everything cached, the page cache dropped.
        let warm = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache)
        try dropKernelCaches()
        try readFirstMiB(warm)
        /// Bytes of a unit file in the page cache, and its size.
        func resident(_ path: String) throws -> (cached: Int, size: Int) {
            let fields = try check("/usr/bin/fincore", ["--raw", "--bytes", "--noheadings", "--output", "RES,SIZE", path])
                .output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            return (fields.first ?? -1, fields.last ?? -1)
        }
        let units = try unitFiles(cache)
        let current = try XCTUnwrap(units.firstIndex { $0.start < lastReadEnd && $0.start + $0.size >= lastReadEnd })
        let ahead = units[(current + 1)...].prefix(2).map(\.path)
        XCTAssertEqual(ahead.count, 2)
        XCTAssertTrue(Deadline.poll(seconds: 60) { ahead.allSatisfy { (try? resident($0)).map { $0.cached >= $0.size } ?? false } },
                      "\(ahead.map { (try? resident($0)).debugDescription })")
        unmount(warm)
        for far in units where far.start >= lastReadEnd + 4 * unit {
            XCTAssertEqual(try resident(far.path).cached, 0, "a unit far ahead was read ahead too: \(far.start)")
        }
    }

    /// The cache holds ciphertext only: after a whole file was read through
    /// the mount, no piece of its plaintext and neither form of the key
    /// (the key file's hex text, its bytes) is in any file of the cache.
    func testCache_HoldsNoPlaintextAndNoKey() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["plain.bin": 1 << 20])
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache)
        XCTAssertEqual(try sha256(mounted.path("plain.bin")), try sha256("\(published.source)/plain.bin"))
        // The file's ciphertext but for what came with the mount's first
        // request (64 KiB, kept in memory); the last unit may be stored
        // just after the read that needed it returned.
        let stored = (1 << 20) - (64 << 10)
        XCTAssertTrue(Deadline.poll(seconds: 10) { ((try? self.unitFiles(cache)) ?? []).reduce(0) { $0 + Int($1.size) } >= stored })
        unmount(mounted)
        // 32-byte pieces of the plaintext every 4 KiB, and the key.
        let found = try python("""
            import os, sys
            plain = open(sys.argv[1], 'rb').read()
            text = open(sys.argv[2], 'rb').read().strip()
            needles = {f'plaintext at {i}': plain[i:i + 32] for i in range(0, len(plain) - 32, 4096)}
            needles.update({'key file text': text, 'key bytes': bytes.fromhex(text.decode())})
            cached = 0
            for root, _, files in os.walk(sys.argv[3]):
                for name in files:
                    data = open(os.path.join(root, name), 'rb').read()
                    cached += len(data)
                    for what, needle in needles.items():
                        if needle in data:
                            print(what, 'in', name)
            print('cached', cached)
            """, ["\(published.source)/plain.bin", published.key, cache]).output
        let lines = found.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { !$0.hasPrefix("cached ") }, [], "the cache holds what it must not")
        // Not vacuous: the scan saw the ciphertext.
        let cachedBytes = try XCTUnwrap(lines.last.flatMap { Int($0.split(separator: " ").last ?? "") })
        XCTAssertGreaterThanOrEqual(cachedBytes, stored, found)
    }

    /// Random reads that happen to land in the unit after the last one
    /// start no read-ahead: each would cost two more units.
    func testRandomReadsIntoTheNextUnit_StartNoReadAhead() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["big.bin": 16 << 20])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "4M"])
        try server.resetProxy()
        // Unit 1, then unit 2 seven MiB further on.
        for offset in [(4 << 20) + 100_000, 11 << 20] {
            XCTAssertEqual(try pread(mounted.path("big.bin"), offset: offset).result,
                           try expected("\(published.source)/big.bin", offset: offset))
        }
        // At most three requests per read (its own chunk, the bytes of its
        // unit before and after it), at most a unit each: read-ahead would
        // add two more units, 8 MiB.
        XCTAssertFalse(Deadline.poll(seconds: 2) {
            guard let stats = try? server.proxyStats() else { return true }
            return stats.requests > 6 || stats.bytes > 2 * (4 << 20)
        }, "\(String(describing: try? server.proxyStats())), expected the two reads' units only")
        unmount(mounted)
    }

    func testPrefetch_NoneFetchesOnDemand_AllFillsTheCacheAtMount() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 400_000, "dir/b.bin": 300_000, "dir/c.txt": 5])
        let bundleSize = try BundleSurgery.size(of: published.bundle)
        try server.resetProxy()
        var mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--prefetch", "none"])
        // The index is still read whole at mount (its tag covers it all),
        // through the cache rather than into memory.
        XCTAssertLessThanOrEqual(try server.proxyStats().requests, 2)
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)

        // all: head, index and every unit arrive without a read (together
        // exactly the bundle); then the server may go away.
        try server.resetProxy()
        mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--prefetch", "all"])
        XCTAssertTrue(Deadline.poll(seconds: 30) { (try? server.proxyStats().bytes) == Int(bundleSize) },
                      "prefetched \((try? server.proxyStats().bytes) ?? -1) of \(bundleSize) bytes")
        server.stopNginx()
        try dropKernelCaches()
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)
    }

    /// The index kept in memory (`--prefetch index`) damaged on the way:
    /// it fails authentication, is fetched once more, and the mount
    /// serves the right bytes.
    func testPrefetchIndex_IndexDamagedOnTheWayIsFetchedAgain() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 300_000, "b.bin": 200_000])
        // The head passes; the index's request gets bits flipped, once.
        try server.setFault("flip", count: 1, ["skip": "1", "every": "1000"])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key)
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)
    }

    /// With `--prefetch none` the index is read through the cache like
    /// content: a damaged cached copy of it is dropped and fetched again,
    /// as a damaged chunk is, and the mount serves the right bytes.
    func testPrefetchNone_DamagedCachedIndexIsFetchedAgain() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 300_000, "b.bin": 200_000])
        let cache = try scratch.makeDirectory("cache")
        let url = server.url("bundle.encfs")
        var mounted = try mountRemote(url, key: published.key, cache: cache, ["--prefetch", "none"])
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)
        // The last unit holds the end of the bundle: the index and its tag.
        let last = try XCTUnwrap(try unitFiles(cache).last)
        XCTAssertEqual(last.start + last.size, try BundleSurgery.size(of: published.bundle))
        try BundleSurgery.flipByte(at: last.size / 2, in: last.path)
        try server.resetProxy()
        mounted = try mountRemote(url, key: published.key, cache: cache, ["--prefetch", "none"])
        XCTAssertGreaterThan(try server.proxyStats().bytes, 0, "the damaged index must be fetched again")
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)
    }

    /// With `--prefetch none` and a small index cache, index pages are
    /// read again from the cache while the mount runs: a cached copy
    /// damaged meanwhile is dropped and fetched again, never EIO.
    func testPrefetchNone_IndexUnitDamagedWhileMounted_IsFetchedAgain() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        // About 10 index pages of 16 KiB, against a cache of 4.
        let published = try publish(server, Dictionary(uniqueKeysWithValues: (0..<2000).map { (String(format: "f%04d.txt", $0), 10) }))
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                      ["--prefetch", "none", "--index-cache", "64"])
        let expected = try digests(published.source)
        XCTAssertEqual(try digests(mounted.mountpoint), expected)
        let last = try XCTUnwrap(try unitFiles(cache).last)
        XCTAssertEqual(last.start + last.size, try BundleSurgery.size(of: published.bundle))
        XCTAssertGreaterThan(last.size, 64 << 10, "the index does not outgrow the index cache")
        try BundleSurgery.flipByte(at: last.size / 2, in: last.path)
        try dropKernelCaches()
        try server.resetProxy()
        XCTAssertEqual(try digests(mounted.mountpoint), expected, "a damaged index page was used or failed")
        XCTAssertGreaterThan(try server.proxyStats().bytes, 0, "the damaged index must be fetched again")
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    // MARK: - Faults

    func testFaults_TransientOnesAreRetried() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let names = (0..<9).map { "f\($0).bin" }
        let published = try publish(server, Dictionary(uniqueKeysWithValues: names.map { ($0, 300_000) }))
        // 10 s deadline: a stall is cut after 3 s and retried.
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                      ["--net-timeout", "10", "--cache-size", "0"])
        let faults: [(String, Int?, [String: String])] = [
            ("status", 2, ["code": "503"]), ("status", 1, ["code": "500"]), ("status", 1, ["code": "429", "retry_after": "1"]),
            ("reset", 1, ["after": "1000"]), ("short", 1, [:]), ("stall", 1, ["after": "1000"]),
            ("pass", nil, ["latency_ms": "30", "bytes_per_second": "4000000"]),
            // Damaged on the way once: the chunk fails authentication, the
            // reader reads it again, fresh.
            ("flip", 1, ["every": "4096"]),
        ]
        for (index, (mode, count, parameters)) in faults.enumerated() {
            try server.setFault(mode, count: count, parameters)
            let file = names[index]
            XCTAssertEqual(try sha256(mounted.path(file)), try sha256("\(published.source)/\(file)"), "\(mode) \(parameters)")
            try server.resetProxy()
        }
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    /// A transfer that trickles below the minimum rate (1 KiB/s) is cut
    /// after a third of `--net-timeout` and retried, instead of holding
    /// the read until its deadline (then EIO).
    func testFaults_TrickleBelowTheMinimumRateIsCutAndRetried() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["t.bin": 300_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--net-timeout", "12", "--fetch-size", "64K"])
        try server.resetProxy()
        try server.setFault("pass", ["bytes_per_second": "500"])
        let reader = try SpawnedProcess(Tools.python, ["-c", """
            import errno, hashlib, os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            try:
                print(hashlib.sha256(os.pread(fd, 4096, 150000)).hexdigest())
            except OSError as e:
                print(errno.errorcode[e.errno])
            """, mounted.path("t.bin")])
        addTeardownBlock {
            reader.signal(SIGKILL)
            _ = reader.wait(deadline: Deadline(seconds: 10))
        }
        // Once the slow responses have begun (each keeps its rate), later
        // ones go at full speed.
        XCTAssertTrue(Deadline.poll(seconds: 10) { ((try? server.proxyStats().bytes) ?? 0) > 0 })
        let trickling = try server.proxyStats().requests
        try server.setFault("pass", ["bytes_per_second": "0"])
        let out = reader.drain(deadline: Deadline(seconds: 30))
        XCTAssertFalse(out.timedOut)
        XCTAssertEqual(String(decoding: out.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
                       try expected("\(published.source)/t.bin", offset: 150_000))
        XCTAssertGreaterThan(try server.proxyStats().requests, trickling, "the slow transfer was not retried")
        unmount(mounted)
    }

    /// `--retries N` is the budget of attempts after the first: with 0 a
    /// single 503 fails the read (EIO, logged), with 1 the same fault is
    /// retried and the read served.
    func testRetries_TheOptionIsTheBudget() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 600_000])
        let offset = 300_000
        let expectedPiece = try expected("\(published.source)/a.bin", offset: offset)
        for (retries, result) in [("0", "EIO"), ("1", expectedPiece)] {
            let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                          ["--retries", retries, "--net-timeout", "10", "--fetch-size", "64K"])
            try server.setFault("status", count: 1, ["code": "503"])
            XCTAssertEqual(try pread(mounted.path("a.bin"), offset: offset).result, result, "--retries \(retries)")
            XCTAssertEqual(mounted.logLines().contains { $0.contains("503") }, retries == "0", "\(retries): \(mounted.logLines())")
            unmount(mounted)
            try server.resetProxy()
        }
    }

    /// `--net-timeout 0` waits as long as the server fails, like a hard NFS
    /// mount: a read that meets nothing but 503s is neither failed at once
    /// nor at any short deadline, keeps retrying, and returns the right
    /// bytes once the server answers again.
    func testNetTimeoutZero_ReadWaitsForTheServerToRecover() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 600_000])
        let offset = 300_000
        let expectedPiece = try expected("\(published.source)/a.bin", offset: offset)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                      ["--net-timeout", "0", "--retries", "1000", "--fetch-size", "64K"])
        try server.setFault("status", ["code": "503"])
        let requestsBefore = try server.proxyStats().requests
        let resultFile = scratch.url(uniqueName("read.result"))
        let reader = try SpawnedProcess(Tools.python, ["-c", """
            import errno, hashlib, os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            try:
                result = hashlib.sha256(os.pread(fd, 4096, int(sys.argv[2]))).hexdigest()
            except OSError as e:
                result = errno.errorcode[e.errno]
            open(sys.argv[3], 'w').write(result)
            """, mounted.path("a.bin"), String(offset), resultFile])
        defer {
            reader.signal(SIGKILL)
            _ = reader.wait(deadline: Deadline(seconds: 10))
        }
        func result() -> String { (try? String(contentsOfFile: resultFile, encoding: .utf8)) ?? "(none)" }
        // Twice the deadline the other tests mount with.
        XCTAssertNil(reader.wait(deadline: Deadline(seconds: 4)), "the read ended while the server failed: \(result())")
        XCTAssertGreaterThan(try server.proxyStats().requests, requestsBefore + 1, "the read did not retry")
        try server.resetProxy()
        XCTAssertNotNil(reader.wait(deadline: Deadline(seconds: 30)), "the read did not end after the server recovered")
        XCTAssertEqual(result(), expectedPiece)
        unmount(mounted)
    }

    /// `--connections N`: reads of many units at once share at most N
    /// kept-alive connections, and use more than one when N allows.
    func testConnections_TheOptionBoundsTheConnections() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let names = (0..<8).map { "c\($0).bin" }
        let published = try publish(server, Dictionary(uniqueKeysWithValues: names.map { ($0, 100_000) }))
        let expectedPieces = try names.map { try expected("\(published.source)/\($0)", offset: 0) }
        for connections in [1, 3] {
            let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                          ["--connections", String(connections), "--net-timeout", "30", "--fetch-size", "64K"])
            try server.resetProxy()
            // Each request answered 100 ms late: the eight reads overlap.
            try server.setFault("pass", ["latency_ms": "100"])
            let read = try python("""
                import hashlib, os, sys, threading
                digests = {}
                def piece(path):
                    fd = os.open(path, os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                    digests[path] = hashlib.sha256(os.pread(fd, 4096, 0)).hexdigest()
                    os.close(fd)
                readers = [threading.Thread(target=piece, args=(path,)) for path in sys.argv[1:]]
                for reader in readers: reader.start()
                for reader in readers: reader.join()
                print("\\n".join(digests.get(path, "failed") for path in sys.argv[1:]))
                """, names.map { mounted.path($0) }, timeout: 60)
            XCTAssertEqual(read.output.split(separator: "\n").map(String.init), expectedPieces, "--connections \(connections)")
            let used = try server.proxyConnectionsUsed()
            XCTAssertGreaterThanOrEqual(used, 1)
            XCTAssertLessThanOrEqual(used, connections, "--connections \(connections)")
            if connections > 1 { XCTAssertGreaterThan(used, 1, "eight reads at once went over one connection") }
            unmount(mounted)
            try server.resetProxy()
        }
    }

    /// Connections refused (nothing listens yet, or any more) are retried
    /// until the deadline: at mount, and for a read.
    func testFaults_RefusedConnectionsAreRetried() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["a.bin": 100_000, "b.bin": 300_000])
        let port = try RemoteServer.freePort()
        var proxy: SpawnedProcess?
        /// The fault proxy on `port`, in front of nginx.
        func startProxy() throws {
            let portFile = scratch.url(uniqueName("proxy.port"))
            let started = try SpawnedProcess(Tools.python, ["\(Tools.repositoryRoot)/Scripts/fault-proxy.py", String(port),
                                                            String(server.port), portFile])
            addTeardownBlock {
                started.signal(SIGKILL)
                _ = started.wait(deadline: Deadline(seconds: 10))
            }
            XCTAssertTrue(Deadline.poll(seconds: 10) { access(portFile, F_OK) == 0 })
            proxy = started
        }
        let mountpoint = try scratch.makeDirectory("mnt")
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let mounting = try SpawnedProcess(try Tools.mount(), ["http://127.0.0.1:\(port)/bundle.encfs", mountpoint, "--key-file", published.key,
                                                              "--cache-dir", try scratch.makeDirectory("cache"), "--net-timeout", "20",
                                                              "--fetch-size", "64K"])
        usleep(1_000_000)
        XCTAssertTrue(mounting.isRunning, "the mount gave up on a refused connection instead of retrying")
        try startProxy()
        XCTAssertEqual(mounting.wait(deadline: Deadline(seconds: 30))?.code, 0)
        XCTAssertTrue(Deadline.poll(seconds: 15) { MountTable.isServing(mountpoint) })
        XCTAssertEqual(try sha256("\(mountpoint)/a.bin"), try sha256("\(published.source)/a.bin"))
        // The server goes away mid-mount and comes back while a read waits.
        proxy?.signal(SIGKILL)
        _ = proxy?.wait(deadline: Deadline(seconds: 10))
        let reader = try SpawnedProcess(Tools.python, ["-c", "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())",
                                                       "\(mountpoint)/b.bin"])
        usleep(1_000_000)
        XCTAssertTrue(reader.isRunning, "the read gave up on a refused connection instead of retrying")
        try startProxy()
        let out = reader.drain(deadline: Deadline(seconds: 30))
        XCTAssertFalse(out.timedOut)
        XCTAssertEqual(String(decoding: out.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
                       try sha256("\(published.source)/b.bin"))
        _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil)
    }

    func testFaults_PersistentOnesFailWithinTheDeadline_StallKeepsCachedPartsAndUnmount() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["cached.bin": 100_000, "dir/x.txt": 10, "a.bin": 2 << 20])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), try sha256("\(published.source)/cached.bin"))
        var offset = 1 << 20
        for (mode, parameters, logged) in [("status", ["code": "500"], "status 500"), ("status", ["code": "403"], "presigned URL may have expired"),
                                           ("full200", [:], "does not answer range requests"),
                                           ("flip", ["every": "4096"], "failed authentication"),
                                           ("stall", ["after": "10"], "did not deliver in time")] {
            try server.setFault(mode, parameters)
            let read = try pread(mounted.path("a.bin"), offset: offset)
            XCTAssertEqual(read.result, "EIO", "\(mode) \(parameters)")
            XCTAssertLessThanOrEqual(read.seconds, 2 + 1, "\(mode) \(parameters): the read outlived --net-timeout")
            XCTAssertTrue(mounted.logLines().contains { $0.contains(logged) }, "\(mode): \(mounted.logLines())")
            offset += 128 << 10
        }
        // During a stall: a reader waits on the network, yet listing and
        // cached data are served, and the mount comes down.
        try server.setFault("stall", ["after": "10"])
        let waiting = try SpawnedProcess(Tools.python, ["-c", "import sys; open(sys.argv[1], 'rb').read()", mounted.path("a.bin")])
        usleep(300_000)
        XCTAssertEqual(try check("/bin/ls", ["-R", mounted.mountpoint]).output.contains("x.txt"), true)
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), try sha256("\(published.source)/cached.bin"))
        waiting.signal(SIGKILL)
        XCTAssertNotNil(waiting.wait(deadline: Deadline(seconds: 10)))
        let unmounted = try run(Tools.fusermount, ["-u", mounted.mountpoint], timeout: 10)
        XCTAssertEqual(unmounted.status, 0, unmounted.summary)
        XCTAssertTrue(Deadline.poll(seconds: 5) { !MountTable.isMounted(mounted.mountpoint) })
    }

    func testMount_RefusesWhatIsNotThisBundle() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a": 10])
        let mountpoint = try scratch.makeDirectory("mnt")
        let url = server.url("bundle.encfs")
        for (mode, parameters, message) in [("full200", [:], "does not answer range requests"),
                                            ("status", ["code": "403"], "a presigned URL may have expired"),
                                            ("status", ["code": "416"], "is not the bundle that was expected")] {
            try server.setFault(mode, count: 1, parameters)
            let result = try run(try Tools.mount(), [url, mountpoint, "--key-file", published.key, "--net-timeout", "2"])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines.first?.hasPrefix("encfs-mount: error: "), true, result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains(message), "\(mode): \(result.errorOutput)")
            XCTAssertFalse(MountTable.isMounted(mountpoint))
        }
        // An object longer than its header says: not this bundle either.
        let longer = "\(server.root)/longer.encfs"
        _ = try sh("cp \"$1\" \"$2\" && printf x >> \"$2\"", [published.bundle, longer])
        let extended = try run(try Tools.mount(), [server.url("longer.encfs"), mountpoint, "--key-file", published.key])
        XCTAssertEqual(extended.status, 1, extended.summary)
        XCTAssertTrue(extended.errorOutput.contains("but its header records"), extended.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
        let missing = try run(try Tools.mount(), [server.url("nothing.encfs"), mountpoint, "--key-file", published.key])
        XCTAssertEqual(missing.status, 1, missing.summary)
        XCTAssertTrue(missing.errorOutput.contains("404"), missing.errorOutput)
    }

    /// A server that lies about the bundle's size (in Content-Range and in
    /// the header's lengths, which nothing has authenticated yet):
    /// `encfs-mount -f` and `encfs-inspect` with the key fail with one
    /// clear line, and nothing, with the key or without, allocates what
    /// the server claims: no abort, a small peak RSS (measured by the
    /// parent, `getrusage(RUSAGE_CHILDREN)`; the bound is 200 MiB, a
    /// tenth of a claim of 2 GiB and far above a tool's few MiB).
    func testLyingServer_HugeClaimedSize_NothingAllocatedBeforeAuthentication() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 100_000])
        let url = server.url("bundle.encfs")
        let common = ["--cache-dir", try scratch.makeDirectory("cache"), "--net-timeout", "2"]
        for claimed in [UInt64(1) << 40, UInt64(1) << 30] {
            try server.setFault("claim", ["size": String(claimed)])
            let mountpoint = try scratchMountpoint()
            let runs: [(tool: String, arguments: [String], error: String?)] = [
                (try Tools.mount(), [url, mountpoint, "-f", "--key-file", published.key] + common, "encfs-mount: error: "),
                (try Tools.inspect(), ["ls", url, "--key-file", published.key] + common, "encfs-inspect: error: "),
                (try Tools.inspect(), ["info", url] + common, nil),
            ]
            for run in runs {
                let what = "\(claimed) bytes claimed: \(run.arguments.prefix(3).joined(separator: " "))"
                let measured = try check(Tools.python, ["-c", """
                    import resource, subprocess, sys
                    child = subprocess.run(sys.argv[1:], capture_output=True, timeout=60)
                    sys.stderr.buffer.write(child.stderr)
                    print(child.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
                    """, run.tool] + run.arguments)
                let fields = measured.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                XCTAssertEqual(fields.count, 2, "\(what): \(measured.output)")
                guard fields.count == 2 else { continue }
                XCTAssertGreaterThanOrEqual(fields[0], 0, "\(what): killed by signal \(-fields[0]); \(measured.errorOutput)")
                XCTAssertLessThan(fields[1], 200 << 10, "\(what): peak RSS \(fields[1]) KiB")
                if let error = run.error {
                    XCTAssertEqual(fields[0], 1, "\(what): \(measured.errorOutput)")
                    XCTAssertEqual(measured.errorLines.filter { !$0.hasPrefix("hint: ") }.count, 1, "\(what): \(measured.errorOutput)")
                    XCTAssertTrue(measured.errorOutput.hasPrefix(error), "\(what): \(measured.errorOutput)")
                }
                XCTAssertFalse(MountTable.isMounted(mountpoint))
            }
        }
    }

    func testReplacedBundle_CachedDataServesUncachedFails() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        // Packed in name order; the spacer keeps read-ahead after early.bin
        // from reaching late.bin.
        let published = try publish(server, ["early.bin": 300_000, "gap.bin": 1 << 20, "late.bin": 300_000, "later.bin": 300_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("early.bin")), try sha256("\(published.source)/early.bin"))
        // Another bundle renamed over it: a new ETag and size.
        let replacement = try scratch.makeDirectory("replacement")
        _ = try scratch.write("replacement/other", Array(repeating: 7, count: 1000))
        let staged = "\(server.root)/staged.encfs"
        try packOrThrow(replacement, staged, keyFile: published.key)
        XCTAssertEqual(rename(staged, published.bundle), 0)
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("early.bin")), try sha256("\(published.source)/early.bin"))
        XCTAssertEqual(try pread(mounted.path("late.bin"), offset: 0).result, "EIO")
        XCTAssertEqual(try pread(mounted.path("later.bin"), offset: 100_000).result, "EIO")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("replaced") }.count, 1, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    /// The other signs of a replaced object: its ETag changed (the proxy
    /// answers 412 to the pinned If-Match, as the server then would; or,
    /// as a server that ignores If-Match, sends the object with another
    /// ETag: its bytes are not used), the
    /// object is gone (404), and, from a server that sends no ETag, another
    /// size. Each time: uncached reads EIO with one log line, cached ones
    /// served.
    func testReplacedBundle_ETagChangedGoneOrResized() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["early.bin": 300_000, "gap.bin": 1 << 20, "late.bin": 300_000])
        let early = try sha256("\(published.source)/early.bin")
        let replacement = try scratch.makeDirectory("replacement")
        _ = try scratch.write("replacement/other", Array(repeating: 7, count: 1000))
        let resized = "\(scratch.url("resized.encfs"))"
        try packOrThrow(replacement, resized, keyFile: published.key)
        let aside = scratch.url("aside.encfs")
        let changes: [(String, setUp: () throws -> Void, change: () throws -> Void, undo: () throws -> Void)] = [
            ("ETag changed", {}, { try server.setFault("etag", ["value": "\"other-1\""]) }, { try server.resetProxy() }),
            ("ETag changed, If-Match ignored", {}, { try server.setFault("etag", ["value": "\"other-2\"", "ignore_if_match": "1"]) },
             { try server.resetProxy() }),
            ("gone", {}, { XCTAssertEqual(rename(published.bundle, aside), 0) }, { XCTAssertEqual(rename(aside, published.bundle), 0) }),
            ("resized without an ETag", { try server.setFault("noetag") }, { _ = try self.sh("cp \"$1\" \"$2\"", [resized, published.bundle]) }, {}),
        ]
        for (what, setUp, change, undo) in changes {
            try setUp()
            let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
            XCTAssertEqual(try sha256(mounted.path("early.bin")), early, what)
            try change()
            try dropKernelCaches()
            XCTAssertEqual(try sha256(mounted.path("early.bin")), early, "\(what): cached data")
            XCTAssertEqual(try pread(mounted.path("late.bin"), offset: 100_000).result, "EIO", what)
            XCTAssertEqual(try pread(mounted.path("late.bin"), offset: 200_000).result, "EIO", what)
            XCTAssertEqual(mounted.logLines().filter { $0.contains("replaced") }.count, 1, "\(what): \(mounted.logLines())")
            unmount(mounted)
            try undo()
        }
    }

    /// Readers stuck on a stalled server take at most all but two worker
    /// threads: more are refused at once (EIO, logged), and listing and
    /// cached reads go on meanwhile.
    func testStall_ReadsBeyondTheWaitingLimitAreRefused() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let names = (0..<6).map { "u\($0).bin" }
        let published = try publish(server, Dictionary(uniqueKeysWithValues: (names + ["cached.bin"]).map { ($0, 200_000) }))
        // 4 workers: at most 2 reads wait for the network.
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                      ["--threads", "4", "--net-timeout", "10", "--fetch-size", "64K"])
        let cached = try sha256("\(published.source)/cached.bin")
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), cached)
        try server.setFault("stall", ["after": "10"])
        let readers = try names.map { name in
            try SpawnedProcess(Tools.python, ["-c", """
                import errno, os, sys
                fd = os.open(sys.argv[1], os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                try:
                    os.pread(fd, 4096, 100000); print("read")
                except OSError as e:
                    print(errno.errorcode[e.errno])
                """, mounted.path(name)])
        }
        XCTAssertTrue(Deadline.poll(seconds: 10) { mounted.logLines().contains { $0.contains("too many reads are waiting") } },
                      mounted.logLines().joined(separator: "\n"))
        XCTAssertTrue(try check("/bin/ls", ["-R", mounted.mountpoint]).output.contains("u5.bin"))
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), cached)
        try server.resetProxy()
        // Nothing wrong was returned: each reader read or got EIO.
        for reader in readers {
            let out = reader.drain(deadline: Deadline(seconds: 30))
            XCTAssertFalse(out.timedOut)
            XCTAssertTrue(["read\n", "EIO\n"].contains(String(decoding: out.stdout, as: UTF8.self)), String(decoding: out.stdout, as: UTF8.self))
        }
        unmount(mounted)
    }

    /// A slow server is not a stalled one: with few workers, the kernel's
    /// parallel read-ahead requests of one sequential reader all wait for
    /// the network, and none is refused.
    func testSlowServer_FewWorkers_SequentialReadIsNeverRefused() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 2 << 20])
        // 4 workers: at most 2 reads wait for the network at once.
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                      ["--threads", "4", "--fetch-size", "64K", "--net-timeout", "30"])
        try server.setFault("pass", ["latency_ms": "300"])
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    /// Without --cache-dir: /var/cache/encfs for root; for anyone else
    /// $XDG_CACHE_HOME/encfs, else ~/.cache/encfs; one directory per
    /// bundle id, owner only.
    func testCacheDirectory_Defaults() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        _ = try publish(server, ["a.bin": 100_000])
        let url = server.url("bundle.encfs")
        let info = try check(try Tools.inspect(), ["info", url])
        let id = try XCTUnwrap(info.output.split(separator: "\n").first { $0.hasPrefix("bundle id:") }?
            .split(separator: " ").last.map(String.init))
        let rootCache = "/var/cache/encfs/\(id)"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: rootCache) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(rootCache)/lock"), rootCache)
        // mkdtemp made the scratch directory 0700: let the other user reach
        // its home in it.
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let home = try scratch.makeDirectory(uniqueName("home"))
        XCTAssertEqual(chown(home, 65534, 65534), 0)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        for (environment, expected) in [(["XDG_CACHE_HOME": "\(home)/xdg", "HOME": home], "\(home)/xdg/encfs/\(id)"),
                                        (["XDG_CACHE_HOME": nil, "HOME": home], "\(home)/.cache/encfs/\(id)")] {
            assertSuccess(try run("setpriv", asNobody + [try Tools.inspect(), "info", url], environment: environment))
            var st = stat()
            XCTAssertEqual(stat(expected, &st), 0, expected)
            XCTAssertEqual(st.st_uid, 65534, expected)
            XCTAssertEqual(st.st_mode & 0o777, 0o700, expected)
        }
    }

    /// A fresh mountpoint, unmounted at teardown should a mount that
    /// must fail succeed.
    private func scratchMountpoint() throws -> String {
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt"))
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        return mountpoint
    }

    /// The bundle id of the bundle at `url`, as `encfs-inspect info` shows it.
    private func bundleID(_ url: String) throws -> String {
        let info = try check(try Tools.inspect(), ["info", url, "--cache-size", "0"])
        return try XCTUnwrap(info.output.split(separator: "\n").first { $0.hasPrefix("bundle id:") }?
            .split(separator: " ").last.map(String.init))
    }

    /// A cache directory another user made (here in a scratch directory
    /// anyone may enter, as /tmp), with the links that user planted in
    /// it: root's daemon refuses it and follows none of them; the files
    /// and directory they point at are unchanged.
    func testCacheDirectory_PlantedByAnotherUser_RefusedNothingFollowed() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["a.bin": 100_000])
        let url = server.url("bundle.encfs")
        let id = try bundleID(url)
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let secret = try scratch.write("root-only-file", Array("root's own\n".utf8), mode: 0o600)
        let secretToo = try scratch.write("root-only-file-2", Array("root's other\n".utf8), mode: 0o600)
        let rootDirectory = try scratch.makeDirectory("root-only-dir")
        XCTAssertEqual(chmod(rootDirectory, 0o700), 0)
        let shared = try scratch.makeDirectory("shared")
        XCTAssertEqual(chmod(shared, 0o1777), 0)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        // One with the bundle's own directory and its lock and version
        // file linked to root's files; one with the bundle's directory
        // linked to root's directory.
        let planted = "\(shared)/planted", plantedLink = "\(shared)/planted-link"
        assertSuccess(try run("setpriv", asNobody + ["sh", "-c", """
            mkdir -m 755 "$1" "$1/$2" && ln -s "$3" "$1/$2/lock" && ln -s "$4" "$1/$2/version.tmp" &&
            mkdir -m 755 "$5" && ln -s "$6" "$5/$2"
            """, "sh", planted, id, secret, secretToo, plantedLink, rootDirectory]))
        for cache in [planted, plantedLink] {
            let mountpoint = try scratchMountpoint()
            let result = try run(try Tools.mount(), [url, mountpoint, "--key-file", published.key, "--cache-dir", cache])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: cache: refused: owned by another user"), result.errorOutput)
            XCTAssertFalse(MountTable.isMounted(mountpoint))
            // encfs-inspect goes without the cache rather than use it.
            XCTAssertEqual(try run(try Tools.inspect(), ["cat", url, "a.bin", "--key-file", published.key, "--cache-dir", cache]).stdout,
                           [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(published.source)/a.bin"))))
        }
        XCTAssertEqual(try String(contentsOfFile: secret, encoding: .utf8), "root's own\n")
        XCTAssertEqual(try String(contentsOfFile: secretToo, encoding: .utf8), "root's other\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: rootDirectory), [])
    }

    /// A cache directory of root's that anyone may write (0777) is
    /// refused; so is one whose path passes through another user's
    /// directory, or one that is root's only through another user's link.
    /// Root's own link is followed.
    func testCacheDirectory_WritableByOthersOrReachedThroughThemRefused_OwnLinkFollowed() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["a.bin": 100_000])
        let url = server.url("bundle.encfs")
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let open = try scratch.makeDirectory("open-cache")
        XCTAssertEqual(chmod(open, 0o777), 0)
        let theirs = try scratch.makeDirectory("theirs")
        XCTAssertEqual(chown(theirs, 65534, 65534), 0)
        let rootDirectory = try scratch.makeDirectory("root-cache")
        XCTAssertEqual(symlink(rootDirectory, "\(theirs)/link"), 0)
        XCTAssertEqual(lchown("\(theirs)/link", 65534, 65534), 0)
        let link = scratch.url("their-link")
        XCTAssertEqual(symlink(rootDirectory, link), 0)
        XCTAssertEqual(lchown(link, 65534, 65534), 0)
        for (cache, message) in [(open, "writable by group or others"), ("\(theirs)/cache", "owned by another user"),
                                 (link, "a symbolic link owned by another user")] {
            let mountpoint = try scratchMountpoint()
            let result = try run(try Tools.mount(), [url, mountpoint, "--key-file", published.key, "--cache-dir", cache])
            XCTAssertEqual(result.status, 1, "\(cache): \(result.summary)")
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: cache: refused: \(message)"), result.errorOutput)
            XCTAssertFalse(MountTable.isMounted(mountpoint))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: rootDirectory), [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(theirs)/cache"))
        // Root's own link to a directory of root's is followed.
        let ownLink = scratch.url("own-link")
        XCTAssertEqual(symlink(rootDirectory, ownLink), 0)
        let mounted = try mountRemote(url, key: published.key, cache: ownLink)
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        unmount(mounted)
        XCTAssertGreaterThan(try cachedBytes(rootDirectory), 0)
    }

    func testServerKilled_UncachedFailsWithinDeadline_CachedServes() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        // Packed in name order; the spacer keeps read-ahead after kept.bin
        // from reaching lost.bin.
        let published = try publish(server, ["kept.bin": 200_000, "spacer.bin": 1 << 20, "z-lost.bin": 200_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("kept.bin")), try sha256("\(published.source)/kept.bin"))
        server.stopNginx()
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("kept.bin")), try sha256("\(published.source)/kept.bin"))
        let lost = try pread(mounted.path("z-lost.bin"), offset: 150_000)
        XCTAssertEqual(lost.result, "EIO")
        XCTAssertLessThanOrEqual(lost.seconds, 2 + 1, "the read outlived --net-timeout + 1 s")
        unmount(mounted)
    }

    // MARK: - Secrets

    /// With `-f` the process that parsed the address serves the mount:
    /// its argv (/proc/PID/cmdline, what `ps` shows) holds neither the
    /// query string nor the user information, whether the address came
    /// as BUNDLE (hidden once parsed), from `--address-file FILE` or from
    /// `--address-file -` (standard input). `--address-file` mounts in the
    /// background as well.
    func testSecrets_ForegroundArgvHoldsNoQueryOrUserInformation() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["s.bin": 100_000])
        let signature = "sig-\(randomHex(bytes: 8))", password = "pw-\(randomHex(bytes: 8))"
        let url = server.url("bundle.encfs", query: "?X-Amz-Signature=\(signature)")
            .replacingOccurrences(of: "http://", with: "http://reader:\(password)@")
        let addressFile = try scratch.write("address", Array("\(url)\n".utf8), mode: 0o600)
        for (how, bundle, input) in [("as BUNDLE", [url], nil), ("--address-file FILE", ["--address-file", addressFile], nil),
                                     ("--address-file -", ["--address-file", "-"], "\(url)\n")] {
            let mountpoint = try scratch.makeDirectory(uniqueName("mnt"))
            let stderrFile = scratch.url(uniqueName("foreground.stderr"))
            let process = try SpawnedProcess(try Tools.mount(), bundle + [mountpoint, "-f", "--key-file", published.key,
                                                                          "--cache-dir", try scratch.makeDirectory(uniqueName("cache"))],
                                             standardErrorFile: stderrFile, feedStandardInput: input != nil)
            addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: process) }
            if let input {
                process.write(input)
                process.closeStandardInput()
            }
            let served = Deadline.poll(seconds: 15) { MountTable.isServing(mountpoint) || !process.isRunning }
            guard served, process.isRunning else {
                XCTFail("\(how): not served: \((try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? "")")
                continue
            }
            XCTAssertEqual(try sha256("\(mountpoint)/s.bin"), try sha256("\(published.source)/s.bin"), how)
            if how == "--address-file FILE" {
                // In the background too: the daemon's argv has the display name.
                let backgroundMountpoint = try scratchMountpoint()
                assertSuccess(try run(try Tools.mount(), ["--address-file", addressFile, backgroundMountpoint, "--key-file", published.key,
                                                          "--cache-dir", try scratch.makeDirectory(uniqueName("cache"))]))
                XCTAssertTrue(Deadline.poll(seconds: 15) { MountTable.isServing(backgroundMountpoint) })
                XCTAssertEqual(try sha256("\(backgroundMountpoint)/s.bin"), try sha256("\(published.source)/s.bin"))
                let daemon = try XCTUnwrap(ProcessTable.daemon(servingAt: backgroundMountpoint))
                let daemonArgv = (ProcessTable.arguments(of: daemon) ?? []).map { String(decoding: $0, as: UTF8.self) }
                XCTAssertTrue(daemonArgv.contains { $0.hasSuffix("/bundle.encfs?…") }, "\(daemonArgv)")
                _ = MountedBundle.unmount(mountpoint: backgroundMountpoint, foreground: nil)
            }
            let shown = String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.pid)/cmdline"))) ?? Data(),
                               as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
            XCTAssertTrue(shown.contains("bundle.encfs") || how != "as BUNDLE", "\(how): \(shown)")
            for secret in [signature, password] { XCTAssertFalse(shown.contains(secret), "\(how): argv shows a secret: \(shown)") }
            _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: process)
        }
    }

    func testSecrets_QueryAndHeaderReachServerOnly() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        // Larger than the first request: reads need more requests.
        let published = try publish(server, ["s.bin": 300_000])
        let signature = "sig-\(randomHex(bytes: 8))"
        let token = "tok-\(randomHex(bytes: 8))"
        try server.setFault("pass", ["require_auth": "Bearer \(token)"])
        let headerFile = try scratch.write("headers", Array("# private bucket\nAuthorization: Bearer \(token)\n".utf8), mode: 0o600)
        let url = server.url("bundle.encfs", query: "?X-Amz-Signature=\(signature)&X-Amz-Expires=60")
        let cache = try scratch.makeDirectory("cache")
        let mounted = try mountRemote(url, key: published.key, cache: cache, ["--header-file", headerFile])
        XCTAssertEqual(try sha256(mounted.path("s.bin")), try sha256("\(published.source)/s.bin"))
        XCTAssertGreaterThanOrEqual(try server.proxyStats().authSeen, 2, "the Authorization header did not reach the server")
        var exposed: [(String, String)] = []
        func scan(_ what: String, _ text: String) {
            for secret in [signature, token] where text.contains(secret) { exposed.append((what, secret)) }
        }
        let daemon = try XCTUnwrap(mounted.daemonPID)
        scan("daemon argv", (ProcessTable.arguments(of: daemon) ?? []).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " "))
        scan("daemon environment", (try? String(contentsOfFile: "/proc/\(daemon)/environ", encoding: .utf8)) ?? "")
        scan("/proc/mounts", (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? "")
        scan("mount log", mounted.logLines().joined(separator: "\n"))
        // Failures name the address without its query.
        let wrongPath = url.replacingOccurrences(of: "bundle.encfs", with: "gone.encfs")
        let failedMount = try run(try Tools.mount(), [wrongPath, try scratch.makeDirectory("mnt2"), "--key-file", published.key,
                                                      "--header-file", headerFile])
        XCTAssertEqual(failedMount.status, 1)
        XCTAssertTrue(failedMount.errorOutput.contains("gone.encfs?…"), failedMount.errorOutput)
        scan("mount error", failedMount.errorOutput + failedMount.output)
        let unauthorized = try run(try Tools.inspect(), ["info", url, "--net-timeout", "2"])
        XCTAssertEqual(unauthorized.status, 1)
        scan("inspect error", unauthorized.errorOutput + unauthorized.output)
        try server.setFault("status", ["code": "403"])
        // Cached data is still served after the server starts refusing.
        XCTAssertEqual(try pread(mounted.path("s.bin"), offset: 0).result, try expected("\(published.source)/s.bin", offset: 0))
        scan("mount log after 403", mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
        // Nor in a file of the cache (its names, its contents).
        scan("cache", try sh("find \"$1\" -type f -print -exec cat {} +", [cache]).output)
        XCTAssertTrue(exposed.isEmpty, "secrets exposed: \(exposed)")
    }
}
