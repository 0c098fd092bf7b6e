import EncFSCore
@testable import EncFSRemote
import Foundation
import SharedTestSupport
import XCTest

/// A cached unit's file read into the page cache ahead of a sequential
/// reader: every page of it is cached when `warm` returns, and a file
/// shorter than the unit the cache recorded (a cut cache file: the cache
/// directory is not trusted) is warmed as far as it goes, without the
/// `SIGBUS` a mapped read past its end would raise.
///
/// What is cached is observed with `mincore` after evicting the file with
/// `POSIX_FADV_DONTNEED`.
final class PageCacheWarmerTests: XCTestCase {
    private let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    private var scratch: TemporaryDirectory?
    private var directory: String { scratch?.pathString ?? "" }

    // /var/tmp, not $TMPDIR: a tmpfs cannot evict.
    override func setUpWithError() throws { scratch = try TemporaryDirectory(prefix: "encfs-warmer", under: "/var/tmp") }

    override func tearDown() { scratch = nil }

    func testWarm_EveryPageOfTheUnitIsCached() throws {
        let size = (5 << 20) + 12_345
        let file = try evictedFile("unit", size: size)
        let warmer = try XCTUnwrap(PageCacheWarmer())
        XCTAssertTrue(warmer.warm(file, count: size))
        XCTAssertEqual(try cachedPages(file, length: size), (size + page - 1) / page)
    }

    func testWarm_FileShorterThanTheUnit_WarmsWhatIsThere() throws {
        let size = 1 << 20
        let file = try evictedFile("cut", size: size)
        let warmer = try XCTUnwrap(PageCacheWarmer())
        XCTAssertTrue(warmer.warm(file, count: 4 << 20))
        XCTAssertEqual(try cachedPages(file, length: size), size / page)
    }

    /// A file of `size` bytes, written, synced and dropped from the
    /// page cache (skips where the file system keeps it).
    private func evictedFile(_ name: String, size: Int) throws -> FileDescriptor {
        let path = "\(directory)/\(name)"
        try Data(repeating: 0xA5, count: size).write(to: URL(fileURLWithPath: path))
        let file = try FileDescriptor.open(Array(path.utf8), flags: O_RDONLY)
        XCTAssertEqual(fsync(file.rawValue), 0)
        XCTAssertEqual(posix_fadvise(file.rawValue, 0, 0, POSIX_FADV_DONTNEED), 0)
        let left = try cachedPages(file, length: size)
        if left > 0 { throw XCTSkip("this file system keeps \(left) pages of \(name) cached after POSIX_FADV_DONTNEED") }
        return file
    }

    /// How many pages of the first `length` bytes of `file` are in the
    /// page cache (`mincore`).
    private func cachedPages(_ file: FileDescriptor, length: Int) throws -> Int {
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, file.rawValue, 0), map != MAP_FAILED else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        defer { munmap(map, length) }
        var vector = [UInt8](repeating: 0, count: (length + page - 1) / page)
        guard mincore(map, length, &vector) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return vector.count { $0 & 1 != 0 }
    }
}
