@testable import CryptCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// `mlock` does not count: unlocking one buffer must not unlock a page that
/// another locked buffer shares. Whether a page is locked is read from the
/// kernel (`/proc/self/smaps`, flag `lo`), not from CryptCore's own books.
final class MemoryLockTests: XCTestCase {
    private let page = MemoryLock.pageSize

    /// `count` fresh pages in a mapping of their own, unmapped after the test.
    private func mapPages(_ count: Int) throws -> UnsafeMutableRawBufferPointer {
        let raw = mmap(nil, count * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let raw, raw != MAP_FAILED else { throw XCTSkip("mmap failed") }
        let region = UnsafeMutableRawBufferPointer(start: raw, count: count * page)
        addTeardownBlock { munmap(raw, count * self.page) }
        return region
    }

    private func slice(_ region: UnsafeMutableRawBufferPointer, _ range: Range<Int>) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: region[range])
    }

    func testSharedPage_StaysLockedUntilTheLastBufferIsReleased() throws {
        let region = try mapPages(3)
        let partialBefore = MemoryLock.partialPageCount
        let a = slice(region, 100..<200)              // inside page 0
        let b = slice(region, 300..<400)              // inside page 0
        let c = slice(region, (page - 50)..<(page + 50)) // end of page 0, start of page 1
        try XCTSkipUnless(MemoryLock.lock(a), "RLIMIT_MEMLOCK forbids locking here")
        XCTAssertTrue(MemoryLock.lock(b))
        XCTAssertTrue(MemoryLock.lock(c))
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress!))
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress! + page))
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress! + 2 * page))

        MemoryLock.unlock(a)
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress!), "unlocking one buffer unlocked a page two others share")
        MemoryLock.unlock(c)
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress!), "page 0 is still b's")
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress! + page), "page 1 was c's alone")
        MemoryLock.unlock(b)
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress!))
        XCTAssertEqual(MemoryLock.partialPageCount, partialBefore)
    }

    func testWholePages_AreNotCountedAndUnlockAtOnce() throws {
        let region = try mapPages(3)
        let partialBefore = MemoryLock.partialPageCount
        let whole = slice(region, page..<(3 * page))
        let neighbour = slice(region, 10..<20)
        try XCTSkipUnless(MemoryLock.lock(whole), "RLIMIT_MEMLOCK forbids locking here")
        XCTAssertEqual(MemoryLock.partialPageCount, partialBefore)
        XCTAssertTrue(MemoryLock.lock(neighbour))
        MemoryLock.unlock(whole)
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress! + page))
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress! + 2 * page))
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress!))
        MemoryLock.unlock(neighbour)
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress!))
        XCTAssertEqual(MemoryLock.partialPageCount, partialBefore)
    }

    /// The public API other modules use on their pooled buffers: the same
    /// rule, and the bytes are wiped.
    func testSecureMemory_ReleaseWipesAndKeepsSharedPagesLocked() throws {
        let region = try mapPages(2)
        let first = slice(region, 0..<1000)
        let second = slice(region, 1000..<(page + 10))
        first.initializeMemory(as: UInt8.self, repeating: 0xAB)
        try XCTSkipUnless(SecureMemory.lock(first), "RLIMIT_MEMLOCK forbids locking here")
        XCTAssertTrue(SecureMemory.lock(second))
        SecureMemory.release(first, locked: true)
        XCTAssertTrue(first.allSatisfy { $0 == 0 })
        XCTAssertTrue(try LockedPages.isLocked(region.baseAddress!))
        SecureMemory.release(second, locked: true)
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress!))
        XCTAssertFalse(try LockedPages.isLocked(region.baseAddress! + page))
    }

    /// Secrets too large for the secure heap are allocated on their own,
    /// several to a page. Freeing every other one must leave every byte of
    /// the rest on locked pages.
    func testLargeSecrets_SurvivingNeighboursStayLocked() throws {
        let partialBefore = MemoryLock.partialPageCount
        var secrets: [SecureBytes?] = (0..<64).map { i in
            SecureBytes(copying: [UInt8](repeating: UInt8(i), count: SecureHeap.largestBlock + 44))
        }
        try XCTSkipUnless(secrets.allSatisfy { $0?.isLocked == true }, "RLIMIT_MEMLOCK forbids locking here")
        for i in stride(from: 0, to: secrets.count, by: 2) { secrets[i] = nil }
        for (i, secret) in secrets.enumerated() {
            guard let secret else { continue }
            try secret.withUnsafeBytes { bytes in
                let base = try XCTUnwrap(bytes.baseAddress)
                XCTAssertTrue(try LockedPages.isLocked(base), "secret \(i): first page unlocked by a freed neighbour")
                XCTAssertTrue(try LockedPages.isLocked(base + bytes.count - 1), "secret \(i): last page unlocked by a freed neighbour")
                XCTAssertTrue(bytes.allSatisfy { $0 == UInt8(i) })
            }
        }
        secrets.removeAll()
        XCTAssertEqual(MemoryLock.partialPageCount, partialBefore)
    }

    /// Threads allocating and freeing large secrets beside long-lived ones:
    /// the counts are kept under one lock, so no interleaving of a lock and
    /// an unlock leaves a long-lived secret on an unlocked page.
    func testConcurrentChurn_LongLivedSecretsStayLocked() throws {
        let partialBefore = MemoryLock.partialPageCount
        let longLived = (0..<32).map { i in SecureBytes(copying: [UInt8](repeating: UInt8(i), count: 700)) }
        try XCTSkipUnless(longLived.allSatisfy(\.isLocked), "RLIMIT_MEMLOCK forbids locking here")
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<200 {
                let burst = (0..<8).map { _ in SecureBytes(copying: [UInt8](repeating: UInt8(thread), count: 300 + round % 500)) }
                precondition(burst.allSatisfy { $0.count >= 300 })
            }
        }
        for (i, secret) in longLived.enumerated() {
            try secret.withUnsafeBytes { bytes in
                let base = try XCTUnwrap(bytes.baseAddress)
                XCTAssertTrue(try LockedPages.isLocked(base), "secret \(i): first page")
                XCTAssertTrue(try LockedPages.isLocked(base + bytes.count - 1), "secret \(i): last page")
            }
        }
        _ = consume longLived
        XCTAssertEqual(MemoryLock.partialPageCount, partialBefore)
    }
}

/// Reads from `/proc/self/smaps` whether the kernel holds a page locked.
enum LockedPages {
    struct Unavailable: Error {}

    /// True when the mapping holding `address` has the `lo` (VM_LOCKED)
    /// flag. `mlock` splits mappings at page boundaries, so this is per page.
    static func isLocked(_ address: UnsafeRawPointer) throws -> Bool {
        let target = UInt(bitPattern: address)
        guard let file = fopen("/proc/self/smaps", "r") else { throw XCTSkip("/proc/self/smaps is not readable") }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var inTarget = false
        while getline(&line, &capacity, file) > 0 {
            guard let line else { break }
            let text = String(cString: line)
            if let range = mappingRange(text) {
                inTarget = range.contains(target)
            } else if inTarget, text.hasPrefix("VmFlags:") {
                return text.split(whereSeparator: { $0 == " " || $0 == "\n" }).contains("lo")
            }
        }
        throw Unavailable()
    }

    /// The address range of a mapping header line (`start-end perms …`).
    private static func mappingRange(_ line: String) -> Range<UInt>? {
        guard let field = line.split(separator: " ").first else { return nil }
        let bounds = field.split(separator: "-")
        guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) else { return nil }
        return start..<end
    }
}
