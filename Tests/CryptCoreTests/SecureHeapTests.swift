@testable import CryptCore
import XCTest

/// Small secrets come from OpenSSL's secure heap (locked once), larger ones
/// and any beyond a full heap from their own locked allocation; either way
/// the bytes are what was written and the space is given back.
final class SecureHeapTests: XCTestCase {
    func testSmallSecrets_ComeFromTheHeapAndGoBack() throws {
        // The first random bytes after the heap exists make OpenSSL put its
        // DRBG state there (512 bytes, kept for the life of the process);
        // run alone, this test would count it as a key that never went back.
        _ = try SymmetricKey.random()
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

    // MARK: - OpenSSL's error queue

    /// The code OpenSSL gives the unrelated failure used below, learnt on an
    /// empty queue.
    private func unrelatedErrorCode() -> UInt {
        OpenSSLErrorQueue.clear()
        OpenSSLErrorQueue.queueUnrelatedError()
        guard case .openSSL(_, let code) = openSSLError("EVP_CIPHER_fetch") else {
            preconditionFailure("internal error: openSSLError returns .openSSL")
        }
        return code
    }

    /// Allocates the largest blocks until the heap refuses one; the caller
    /// frees them.
    private func fillHeap() -> [UnsafeMutableRawBufferPointer] {
        var held: [UnsafeMutableRawBufferPointer] = []
        while let (buffer, _) = SecureHeap.allocate(SecureHeap.largestBlock) {
            held.append(buffer)
            precondition(held.count <= SecureHeap.size / SecureHeap.largestBlock, "internal error: the heap never filled")
        }
        return held
    }

    /// A refused allocation adds nothing to the queue, so the next failure
    /// reports its own code. (OpenSSL 3.0 queues nothing for a full heap;
    /// later releases queue CRYPTO_R_SECURE_MALLOC_FAILURE, which this test
    /// catches there.)
    func testFullHeap_NextFailureReportsItsOwnError() {
        let expected = unrelatedErrorCode()
        XCTAssertNotEqual(expected, 0)
        OpenSSLErrorQueue.clear()
        let held = fillHeap()
        defer { held.forEach(SecureHeap.free) }
        XCTAssertFalse(held.isEmpty)
        XCTAssertNil(SecureHeap.allocate(SecureHeap.largestBlock))
        XCTAssertEqual(OpenSSLErrorQueue.oldest, 0, "a refused allocation left an error on the queue")
        OpenSSLErrorQueue.queueUnrelatedError()
        XCTAssertEqual(openSSLError("EVP_CIPHER_fetch"), .openSSL(function: "EVP_CIPHER_fetch", code: expected))
    }

    /// An error queued before an allocation is still there, and still the
    /// oldest, after a successful and after a refused allocation: the heap
    /// neither clears nor adds entries.
    func testAllocation_KeepsErrorsQueuedBefore() {
        let expected = unrelatedErrorCode()
        OpenSSLErrorQueue.clear()
        OpenSSLErrorQueue.queueUnrelatedError()
        let one = SecureHeap.allocate(32)
        XCTAssertNotNil(one)
        XCTAssertEqual(OpenSSLErrorQueue.oldest, expected, "a successful allocation cleared an error it did not cause")
        let held = fillHeap()
        defer {
            held.forEach(SecureHeap.free)
            one.map { SecureHeap.free($0.buffer) }
        }
        XCTAssertNil(SecureHeap.allocate(SecureHeap.largestBlock))
        XCTAssertEqual(OpenSSLErrorQueue.oldest, expected)
        XCTAssertEqual(openSSLError("probe"), .openSSL(function: "probe", code: expected))
        XCTAssertEqual(OpenSSLErrorQueue.oldest, 0, "something besides the queued error was left")
    }

    // MARK: - Private keys and scratch space

    /// OpenSSL keeps X25519 private keys in its secure memory, which is this
    /// heap: key generation and PEM reading set the heap up first.
    func testX25519PrivateKeys_LiveInTheHeap() throws {
        // Warm up: OpenSSL's DRBG may settle in the heap on first use.
        let pem = try PrivateKey.generateX25519().pemPKCS8()
        let before = SecureHeap.usedBytes
        var generated: PrivateKey? = try PrivateKey.generateX25519()
        var read: PrivateKey? = try pem.withUnsafeBytes { try PrivateKey(pem: $0) }
        XCTAssertGreaterThanOrEqual(SecureHeap.usedBytes - before, 2 * 32)
        XCTAssertNotNil(generated)
        XCTAssertNotNil(read)
        generated = nil
        read = nil
        XCTAssertEqual(SecureHeap.usedBytes, before)
    }

    func testScratch_IsZeroedSecureSpaceGivenBack() throws {
        let before = SecureHeap.usedBytes
        let sum = SecureBytes.withScratch(count: 100) { (scratch: UnsafeMutableRawBufferPointer) -> Int in
            XCTAssertEqual(scratch.count, 100)
            XCTAssertTrue(scratch.allSatisfy { $0 == 0 })
            XCTAssertGreaterThanOrEqual(SecureHeap.usedBytes - before, 100)
            scratch.initializeMemory(as: UInt8.self, repeating: 3)
            return scratch.reduce(0) { $0 + Int($1) }
        }
        XCTAssertEqual(sum, 300)
        XCTAssertEqual(SecureHeap.usedBytes, before)
        struct Refused: Error {}
        XCTAssertThrowsError(try SecureBytes.withScratch(count: 8) { (_: UnsafeMutableRawBufferPointer) throws(Refused) in
            throw Refused()
        })
        XCTAssertEqual(SecureHeap.usedBytes, before)
    }
}
