@testable import CryptCore
import XCTest

/// Small secrets come from OpenSSL's secure heap (locked once), larger ones
/// and any beyond a full heap from their own locked allocation; either way
/// the bytes are what was written and the space is given back.
final class SecureHeapTests: XCTestCase {
    func testSmallSecrets_ComeFromTheHeapAndGoBack() throws {
        let before = SecureHeap.usedBytes
        var keys: [SymmetricKey] = []
        for _ in 0..<100 { keys.append(try SymmetricKey.random()) }
        XCTAssertGreaterThanOrEqual(SecureHeap.usedBytes - before, 100 * SymmetricKey.byteCount)
        XCTAssertTrue(keys.allSatisfy { $0.bytes.isLocked }, "this machine's tests run as root: the heap is locked")
        keys.removeAll()
        XCTAssertEqual(SecureHeap.usedBytes, before)
    }

    func testLargeSecret_DoesNotUseTheHeap() {
        let before = SecureHeap.usedBytes
        let large = SecureBytes(copying: [UInt8](repeating: 7, count: SecureHeap.largestBlock + 1))
        XCTAssertEqual(SecureHeap.usedBytes, before)
        XCTAssertEqual(large.withUnsafeBytes { Array($0) }, [UInt8](repeating: 7, count: SecureHeap.largestBlock + 1))
    }

    /// More keys than the heap holds: the rest take the other path, and
    /// every key keeps its own bytes.
    func testFullHeap_FallsBackAndKeepsEveryValue() {
        let count = SecureHeap.size / SymmetricKey.byteCount + 500
        let secrets = (0..<count).map { i in
            SecureBytes(copying: (0..<SymmetricKey.byteCount).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) })
        }
        XCTAssertLessThanOrEqual(SecureHeap.usedBytes, SecureHeap.size)
        for (i, secret) in secrets.enumerated() {
            XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, (0..<SymmetricKey.byteCount).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) })
        }
        // The heap still serves once space is back.
        let used = SecureHeap.usedBytes
        _ = consume secrets
        XCTAssertLessThan(SecureHeap.usedBytes, used)
        XCTAssertNotNil(SecureHeap.allocate(32).map { SecureHeap.free($0.buffer); return true })
    }
}
