import CryptCore
import Dispatch
import Synchronization
import XCTest

/// Several threads, each with its own `AESGCM` context (a context is not
/// thread-safe), seal and open with one shared key at the same time.
final class AESGCMConcurrencyTests: XCTestCase {
    static let threads = 8
    static let messagesPerThread = 1000

    func testSealOpen_EightThreadsOwnContexts() throws {
        let key = try SymmetricKey.random()
        let failures = Atomic<Int>(0)
        let completed = Atomic<Int>(0)

        DispatchQueue.concurrentPerform(iterations: Self.threads) { thread in
            do {
                let gcm = try AESGCM()
                let aad = Array("thread \(thread)".utf8)
                for _ in 0..<Self.messagesPerThread {
                    let size = Int(try SecureRandom.bytes(2).withUnsafeBytes { $0.loadUnaligned(as: UInt16.self) }) % 5000
                    let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
                    let message = try SecureRandom.bytes(size)
                    var ciphertext = [UInt8](repeating: 0, count: size)
                    var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
                    try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: message, into: &ciphertext, tag: &tag)
                    var decrypted = [UInt8](repeating: 0, count: size)
                    try gcm.open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag, into: &decrypted)
                    if decrypted != message { failures.add(1, ordering: .relaxed) }
                    completed.add(1, ordering: .relaxed)
                }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }

        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
        XCTAssertEqual(completed.load(ordering: .relaxed), Self.threads * Self.messagesPerThread)
    }

    func testOpen_EightThreadsRejectCorruptionIndependently() throws {
        // Half the threads open tampered messages while the others open good
        // ones: a failure in one context must not disturb another.
        let key = try SymmetricKey.random()
        let wrongResults = Atomic<Int>(0)

        DispatchQueue.concurrentPerform(iterations: Self.threads) { thread in
            do {
                let gcm = try AESGCM()
                let tamper = thread % 2 == 1
                for i in 0..<200 {
                    let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
                    var sealed = try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: SecureBytes.random(count: 64 + i))
                    if tamper { sealed[i % sealed.count] ^= 0x01 }
                    do {
                        _ = try sealed.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: [], sealed: $0) }
                        if tamper { wrongResults.add(1, ordering: .relaxed) }
                    } catch CryptError.authenticationFailure {
                        if !tamper { wrongResults.add(1, ordering: .relaxed) }
                    }
                }
            } catch {
                wrongResults.add(1, ordering: .relaxed)
            }
        }

        XCTAssertEqual(wrongResults.load(ordering: .relaxed), 0)
    }
}
