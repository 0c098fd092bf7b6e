import Dispatch
@testable import EncFSCore
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The packer's read-ahead thread brings what the packer reads next into
/// the page cache, no further than its window, follows the packer, skips
/// what it cannot open, and stops when told, also while it waits.
///
/// What is cached is observed with `mincore` after evicting the files with
/// `POSIX_FADV_DONTNEED` (their pages are clean once synced), so each test
/// fails if no hint reaches the kernel. The files live under /var/tmp: a
/// tmpfs (where /tmp may be) cannot evict, and the tests skip there.
final class SourcePrefetcherTests: XCTestCase {
    private var scratch: TemporaryDirectory?
    private var directory: [UInt8] { scratch?.path ?? [] }
    private var root: FileDescriptor!
    private let page = Int(sysconf(Int32(_SC_PAGESIZE)))

    override func setUpWithError() throws {
        scratch = try TemporaryDirectory(prefix: "encfs-prefetch-tests", under: "/var/tmp")
        root = try FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY)
    }

    override func tearDown() {
        root = nil
        scratch = nil
    }

    func testPrefetch_EvictedFiles_AreCachedAgain() throws {
        let names = ["a.bin", "b.bin", "c.bin"]
        for name in names { try makeEvictedFile(name, bytes: 1 << 20) }
        let prefetcher = SourcePrefetcher(root: root, files: names.map { .init(relativePath: bytes($0), size: 1 << 20) })
        defer { prefetcher.stop() }
        for name in names {
            XCTAssertTrue(waitUntilCached(name, pages: 0..<((1 << 20) / page)), "\(name) was not read ahead")
        }
    }

    func testPrefetch_StaysWithinItsWindowUntilThePackerMoves() throws {
        let size = 8 << 20
        try makeEvictedFile("big.bin", bytes: size)
        let window = 1 << 20, step = 256 << 10
        let prefetcher = SourcePrefetcher(root: root, files: [.init(relativePath: bytes("big.bin"), size: UInt64(size))],
                                          window: UInt64(window), step: UInt64(step))
        defer { prefetcher.stop() }
        // Hints reach window + one step beyond the packer's position (0).
        let reach = (window + step) / page
        XCTAssertTrue(waitUntilCached("big.bin", pages: 0..<reach), "the window was not read ahead")
        let tail = (4 << 20) / page..<(size / page)
        XCTAssertEqual(try cachedPages("big.bin", tail), 0, "read ahead beyond the window")
        // The packer moves to 4 MiB: the prefetcher follows.
        prefetcher.packerReached(file: 0, offset: 4 << 20)
        XCTAssertTrue(waitUntilCached("big.bin", pages: (4 << 20) / page..<((4 << 20) + window) / page),
                      "the prefetcher did not follow the packer")
    }

    func testPrefetch_AtItsWindow_WaitsForAQuarterOfItBeforeHintingAgain() throws {
        let size = 4 << 20
        try makeEvictedFile("big.bin", bytes: size)
        let window = 1 << 20, step = 64 << 10
        let prefetcher = SourcePrefetcher(root: root, files: [.init(relativePath: bytes("big.bin"), size: UInt64(size))],
                                          window: UInt64(window), step: UInt64(step))
        defer { prefetcher.stop() }
        let reach = window + step
        XCTAssertTrue(waitUntilCached("big.bin", pages: 0..<(reach / page)), "the window was not read ahead")
        // Two steps on, less than a quarter of the window: no new hint.
        prefetcher.packerReached(file: 0, offset: UInt64(2 * step))
        usleep(300_000)
        XCTAssertEqual(try cachedPages("big.bin", (reach / page)..<((reach + 2 * step) / page)), 0,
                       "woken for less than a quarter of its window")
        // A quarter of the window past where it stopped: it follows.
        prefetcher.packerReached(file: 0, offset: UInt64(step + window / 4))
        XCTAssertTrue(waitUntilCached("big.bin", pages: (reach / page)..<((reach + window / 4) / page)),
                      "the prefetcher did not follow the packer")
    }

    func testPrefetch_FileThatCannotBeOpened_IsSkipped() throws {
        try makeEvictedFile("present.bin", bytes: 256 << 10)
        let prefetcher = SourcePrefetcher(root: root, files: [.init(relativePath: bytes("missing.bin"), size: 4096),
                                                              .init(relativePath: bytes("present.bin"), size: 256 << 10)])
        defer { prefetcher.stop() }
        XCTAssertTrue(waitUntilCached("present.bin", pages: 0..<((256 << 10) / page)), "the file after the missing one was not read ahead")
    }

    func testStop_WhileWaitingForThePacker_Returns() throws {
        try makeEvictedFile("big.bin", bytes: 2 << 20)
        let prefetcher = SourcePrefetcher(root: root, files: [.init(relativePath: bytes("big.bin"), size: 2 << 20)],
                                          window: 4096, step: 4096)
        // It hints one step and then waits for a packer that never moves.
        XCTAssertTrue(waitUntilCached("big.bin", pages: 0..<1))
        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            prefetcher.stop()
            stopped.signal()
        }
        XCTAssertEqual(stopped.wait(timeout: .now() + 20), .success, "stop() did not return")
    }

    // MARK: - Helpers

    /// Writes `bytes` bytes to `name`, syncs it and drops it from the page
    /// cache; skips the test where the file system keeps it cached.
    private func makeEvictedFile(_ name: String, bytes count: Int) throws {
        let path = join(directory, bytes(name))
        try FileTree.writeFile(path, [UInt8](repeating: 0x5A, count: count))
        let fd = try FileDescriptor.open(path, flags: O_RDONLY)
        XCTAssertEqual(fsync(fd.rawValue), 0)
        XCTAssertEqual(posix_fadvise(fd.rawValue, 0, 0, POSIX_FADV_DONTNEED), 0)
        let left = try cachedPages(name, 0..<(count / page))
        if left > 0 { throw XCTSkip("this file system keeps \(left) pages of \(name) cached after POSIX_FADV_DONTNEED") }
    }

    /// How many of `pages` of `name` are in the page cache (`mincore`).
    private func cachedPages(_ name: String, _ pages: Range<Int>) throws -> Int {
        let fd = try FileDescriptor.open(join(directory, bytes(name)), flags: O_RDONLY)
        let length = pages.count * page
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd.rawValue, off_t(pages.lowerBound * page)),
              map != MAP_FAILED else { throw POSIXFailure("mmap", bytes(name)) }
        defer { munmap(map, length) }
        var vector = [UInt8](repeating: 0, count: pages.count)
        guard mincore(map, length, &vector) == 0 else { throw POSIXFailure("mincore", bytes(name)) }
        return vector.count { $0 & 1 != 0 }
    }

    /// Waits (at most 20 s) until every page of `pages` is cached.
    private func waitUntilCached(_ name: String, pages: Range<Int>) -> Bool {
        let deadline = DispatchTime.now() + 20
        while DispatchTime.now() < deadline {
            if (try? cachedPages(name, pages)) == pages.count { return true }
            usleep(2000)
        }
        return false
    }
}
