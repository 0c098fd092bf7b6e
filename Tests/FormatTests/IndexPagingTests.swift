import CryptCore
import Dispatch
import Foundation
import Synchronization
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// An opened bundle keeps its index sealed and decrypts 16 KiB pages into a
/// bounded cache (`IndexPages`). With a cache of 4 pages and an index of
/// dozens, every answer must still equal the one from the index held whole
/// in memory, names and symlink targets that straddle two pages included;
/// and a bundle changed after it was opened must give an error, never
/// other entries.
final class IndexPagingTests: XCTestCase {
    /// 30 directories of 60 files and 2 symlinks each, names of 1 … 200
    /// bytes, targets up to 4,000 bytes: about 2,000 entries and an index
    /// of about 40 pages.
    private func makeBundle(in tmp: TemporaryDirectory) throws -> (bundle: [UInt8], key: SymmetricKey) {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 41)
        for d in 0..<30 {
            let dir = join(source, bytes("dir\(d)"))
            try FileTree.makeDirectory(dir)
            for f in 0..<60 {
                let length = 1 + Int(generator.next() % 200)
                let name = bytes("f\(f)-") + [UInt8](repeating: UInt8(ascii: "a") + UInt8(f % 26), count: length)
                try FileTree.writeFile(join(dir, name), bytes("dir\(d)/") + name)
            }
            // Long, and staying inside the bundle (readers refuse a bundle
            // with a link that climbs above its root).
            let longTarget = Array(repeating: bytes("up/"), count: 1000).joined() + bytes("x")
            try FileTree.makeSymlink(join(dir, bytes("link-long")), target: Array(longTarget))
            try FileTree.makeSymlink(join(dir, bytes("link-short")), target: bytes("f0-a"))
        }
        let bundle = tmp.appending("paged.bundle")
        let key = TestSecrets.key(41)
        try packBundle(source: source, destination: bundle, chunkSizeLog2: 12, keys: [.rawKey(key)])
        return (bundle, key)
    }

    /// The index held whole in memory, decrypted here independently of
    /// `IndexPages`.
    private func residentIndex(of bundle: [UInt8], key: SymmetricKey) throws -> BundleIndex {
        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        let file = try FileTree.readFile(bundle)
        let start = Int(reader.header.headerLength) + Int(reader.header.indexOffset)
        let sealed = Array(file[start...])
        let plaintext = try sealed.withUnsafeBytes {
            try AESGCM().open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce,
                              aad: IndexBuilder.associatedData(reader.header), sealed: $0)
        }
        return try BundleIndex(plaintext: plaintext, layout: reader.header.layout, dataLength: reader.header.indexOffset)
    }

    /// Every entry, name, target, path, lookup and subdirectory count, as text.
    private func describe(_ index: BundleIndex) throws -> [String] {
        var lines: [String] = []
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            var line = "\(position) \(entry.kind) \(entry.parent) \(entry.children) \(entry.fileSize) \(entry.payloadOffset) \(entry.targetLength) \(entry.targetOffset) \(entry.mode) "
            line += try index.path(of: entry).hexString
            if entry.kind == .symlink { line += " -> " + (try index.withSymlinkTarget(of: entry) { Array($0) }.hexString) }
            if entry.kind == .directory { line += " subdirs \(index.subdirectoryCount(of: entry))" }
            if entry.kind == .file { line += " id " + entry.withFileID { Array($0) }.hexString }
            if position != 0 {
                let found = try index.name(of: entry).withUnsafeBytes { try index.lookup($0, in: index.entry(at: entry.parent)) }
                line += " found \(found?.position ?? -1)"
            }
            lines.append(line)
        }
        return lines
    }

    func testSmallCache_AnswersEqualTheWholeIndex() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let paged = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: IndexPages.minimumCacheBytes)
        XCTAssertTrue((try XCTUnwrap(paged.index.flatPages)).isPaged)
        XCTAssertEqual((try XCTUnwrap(paged.index.flatPages)).cachedPageLimit, 4)
        let pageCount = ((try XCTUnwrap(paged.index.flatPages)).count + IndexPages.pageSize - 1) / IndexPages.pageSize
        XCTAssertGreaterThan(pageCount, 20, "the index must be much larger than the cache")

        let resident = try residentIndex(of: bundle, key: key)
        XCTAssertFalse((try XCTUnwrap(resident.flatPages)).isPaged)
        let expected = try describe(resident)
        XCTAssertEqual(expected.count, 1 + 30 * 63)
        // Twice: the second pass runs on a cache the first one churned.
        XCTAssertEqual(try describe(paged.index), expected)
        XCTAssertEqual(try describe(paged.index), expected)
        // Backwards, so pages are evicted and loaded in the other order.
        for position in stride(from: paged.index.count - 1, through: 0, by: -7) {
            XCTAssertEqual(try paged.index.path(of: paged.index.entry(at: position)),
                           try resident.path(of: resident.entry(at: position)))
        }
        // File contents come out right through the paged index too.
        let dir = try paged.index.resolve(path: bytes("dir29"))
        let last = try paged.index.entry(at: dir.children.upperBound - 3) // the last file, before the two links
        let name = try paged.index.name(of: last)
        XCTAssertEqual(try paged.contents(of: last), bytes("dir29/") + name)
    }

    func testSmallCache_NamesAndTargetsStraddlePages() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let paged = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: IndexPages.minimumCacheBytes)
        let index = paged.index
        let stringsStart = BundleIndex.headerSize + index.count * IndexEntry.recordSize
        var straddlingNames = 0
        var straddlingTargets = 0
        var straddlingRecords = 0
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            let recordStart = BundleIndex.headerSize + position * IndexEntry.recordSize
            if recordStart / IndexPages.pageSize != (recordStart + IndexEntry.recordSize - 1) / IndexPages.pageSize { straddlingRecords += 1 }
            let nameStart = stringsStart + Int(entry.nameOffset)
            if entry.nameLength > 0, nameStart / IndexPages.pageSize != (nameStart + Int(entry.nameLength) - 1) / IndexPages.pageSize {
                straddlingNames += 1
            }
            if entry.kind == .symlink {
                let targetStart = stringsStart + entry.targetOffset
                if targetStart / IndexPages.pageSize != (targetStart + entry.targetLength - 1) / IndexPages.pageSize {
                    straddlingTargets += 1
                    let target = try index.withSymlinkTarget(of: entry) { Array($0) }
                    XCTAssertEqual(target.count, 3001)
                    XCTAssertEqual(Array(target.suffix(4)), bytes("up/x"))
                }
            }
        }
        // The layout guarantees straddling records (records start at byte
        // 32 of 64); names and long targets straddle by their lengths.
        XCTAssertGreaterThan(straddlingRecords, 0)
        XCTAssertGreaterThan(straddlingNames, 0)
        XCTAssertGreaterThan(straddlingTargets, 0)
    }

    /// A byte of the sealed index changed after the bundle was opened: an
    /// entry on that page must fail with "changed after the bundle was
    /// verified", and entries elsewhere still answer correctly.
    func testChangedAfterOpen_PageFailsNotOtherData() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let paged = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: IndexPages.minimumCacheBytes)
        let resident = try residentIndex(of: bundle, key: key)
        let expected = try describe(resident)
        // A record page the cache does not hold, and an entry on it.
        let cached = Set((try XCTUnwrap(paged.index.flatPages)).cachedPages)
        XCTAssertEqual(cached.count, 4)
        let recordPages = 0...((BundleIndex.headerSize + paged.index.count * IndexEntry.recordSize) / IndexPages.pageSize - 1)
        let page = try XCTUnwrap(recordPages.first { !cached.contains($0) })
        let position = (page * IndexPages.pageSize + 100 - BundleIndex.headerSize) / IndexEntry.recordSize
        let recordOffset = BundleIndex.headerSize + position * IndexEntry.recordSize
        XCTAssertEqual(recordOffset / IndexPages.pageSize, page)
        let indexStart = UInt64(paged.header.headerLength) + paged.header.indexOffset
        try flipByte(at: indexStart + UInt64(recordOffset) + 33, in: bundle) // a byte of its size field
        XCTAssertThrowsError(try paged.index.entry(at: position)) { error in
            guard let e = error as? BundleError else { return XCTFail("\(error)") }
            XCTAssertEqual(ExpectedBundleError(e), .corruptIndex)
            XCTAssertTrue(e.message.contains("index page \(page) changed after the bundle was verified"), e.message)
        }
        // Records on other pages still read, and still read right.
        for other in cached {
            let onPage = max(0, (other * IndexPages.pageSize - BundleIndex.headerSize) / IndexEntry.recordSize + 1)
            guard onPage < paged.index.count, other != page else { continue }
            XCTAssertEqual(try paged.index.entry(at: onPage), try resident.entry(at: onPage))
        }
        // Put the byte back: the page loads again (a failure is not cached).
        try flipByte(at: indexStart + UInt64(recordOffset) + 33, in: bundle)
        XCTAssertEqual(try describe(paged.index), expected)
    }

    func testTruncatedAfterOpen_PageFails() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let paged = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: IndexPages.minimumCacheBytes)
        let indexStart = Int(paged.header.headerLength) + Int(paged.header.indexOffset)
        XCTAssertEqual(truncate(String(decoding: bundle, as: UTF8.self), off_t(indexStart + 100)), 0)
        var failures = 0
        for position in 0..<paged.index.count {
            do {
                _ = try paged.index.path(of: paged.index.entry(at: position))
            } catch let e as BundleError {
                XCTAssertEqual(ExpectedBundleError(e), .corruptIndex, e.message)
                failures += 1
            }
        }
        XCTAssertGreaterThan(failures, paged.index.count / 2)
    }

    /// Four threads resolving random entries at once through a 4-page
    /// cache (the FUSE workers share one): every answer as from the whole
    /// index, while pages are evicted under the others' feet.
    func testSmallCache_ConcurrentReadersGetRightAnswers() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let paged = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: IndexPages.minimumCacheBytes)
        let resident = try residentIndex(of: bundle, key: key)
        let expected = try (0..<resident.count).map { try resident.path(of: resident.entry(at: $0)) }
        let wrong = Mutex(0)
        let checked = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var rng = SeededGenerator(seed: UInt64(500 + thread))
            for _ in 0..<3000 {
                let position = Int(rng.next() % UInt64(expected.count))
                do {
                    let entry = try paged.index.resolve(path: expected[position])
                    let path = try paged.index.path(of: paged.index.entry(at: position))
                    if entry.position != position || path != expected[position] { wrong.withLock { $0 += 1 } }
                } catch {
                    wrong.withLock { $0 += 1 }
                }
                checked.withLock { $0 += 1 }
            }
        }
        XCTAssertEqual(wrong.withLock { $0 }, 0)
        XCTAssertEqual(checked.withLock { $0 }, 12000)
    }

    /// Any cache size from the minimum up serves the same answers.
    func testCacheSizes_SameAnswers() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let (bundle, key) = try makeBundle(in: tmp)
        let expected = try describe(residentIndex(of: bundle, key: key))
        for pages in [4, 5, 17, 1000] {
            let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)], indexCacheBytes: pages * IndexPages.pageSize)
            XCTAssertEqual(try describe(reader.index), expected, "\(pages) pages")
        }
    }

    private func flipByte(at offset: UInt64, in path: [UInt8]) throws {
        let fd = String(decoding: path, as: UTF8.self).withCString { open($0, O_RDWR | O_CLOEXEC) }
        guard fd >= 0 else { throw POSIXFailure("open", path) }
        defer { close(fd) }
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw POSIXFailure("pread", path) }
        byte ^= 0x40
        guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw POSIXFailure("pwrite", path) }
    }
}
