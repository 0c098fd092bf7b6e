import CryptCore
import Foundation
import XCTest

/// Micro-benchmarks of the AES-GCM hot path (one reused context, the reader's
/// pattern) and of small-secret allocation. Skipped unless
/// `ENCFS_CRYPT_BENCH=1`; run them in release:
///
///     ENCFS_CRYPT_BENCH=1 swift test -c release -Xswiftc -enable-testing \
///         --disable-swift-testing --filter AESGCMBenchmarkTests
///
/// Each prints the fastest and the median of fifteen rounds, in nanoseconds
/// of thread CPU time per operation.
/// They assert nothing about speed: numbers depend on the machine.
final class AESGCMBenchmarkTests: XCTestCase {
    override func setUpWithError() throws {
        guard ProcessInfo.processInfo.environment["ENCFS_CRYPT_BENCH"] == "1" else {
            throw XCTSkip("set ENCFS_CRYPT_BENCH=1 to run the CryptCore micro-benchmarks")
        }
    }

    /// Consecutive chunks of one file: the same key object every call.
    func testBenchmark_OpenSameKey() throws {
        for size in [4096, 16384] {
            try benchmarkOpen(size: size, keys: [SymmetricKey.random()], label: "open \(size) B, same key")
        }
    }

    /// Two files read in turn by one thread: the key changes every call.
    func testBenchmark_OpenAlternatingKeys() throws {
        for size in [4096, 16384] {
            try benchmarkOpen(size: size, keys: [SymmetricKey.random(), SymmetricKey.random()],
                              label: "open \(size) B, alternating keys")
        }
    }

    func testBenchmark_SealSameKey() throws {
        let gcm = try AESGCM()
        let key = try SymmetricKey.random()
        let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
        let plaintext = try SecureRandom.bytes(16384)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        try report("seal 16384 B, same key", iterations: 20_000) {
            try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: plaintext, into: &ciphertext, tag: &tag)
        }
    }

    /// One 32-byte secret allocated and freed (a derived file key).
    func testBenchmark_SmallSecretAllocation() throws {
        let source = [UInt8](repeating: 7, count: SymmetricKey.byteCount)
        report("SecureBytes(copying: 32 B)", iterations: 200_000) {
            _ = SecureBytes(copying: source)
        }
    }

    /// One HKDF-SHA256 derivation of a 32-byte file key (encfs-pack makes
    /// one per file).
    func testBenchmark_HKDFFileKey() throws {
        let master = try SymmetricKey.random()
        let salt = try SecureRandom.bytes(16) // the file id
        let info = Array("encfs file key".utf8) + (try SecureRandom.bytes(16)) // label and bundle id
        try report("HKDF-SHA256 32-byte key", iterations: 50_000) {
            _ = try HKDF.deriveKey(from: master, salt: salt, info: info)
        }
    }

    private func benchmarkOpen(size: Int, keys: [SymmetricKey], label: String) throws {
        let gcm = try AESGCM()
        let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
        let plaintext = try SecureRandom.bytes(size)
        var sealed: [(ciphertext: [UInt8], tag: [UInt8])] = []
        for key in keys {
            var ciphertext = [UInt8](repeating: 0, count: size)
            var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
            try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: plaintext, into: &ciphertext, tag: &tag)
            sealed.append((ciphertext, tag))
        }
        var output = [UInt8](repeating: 0, count: size)
        var turn = 0
        try report(label, iterations: size <= 4096 ? 50_000 : 20_000) {
            let index = turn % keys.count
            turn += 1
            try gcm.open(key: keys[index], nonce: nonce, aad: [], ciphertext: sealed[index].ciphertext,
                         tag: sealed[index].tag, into: &output)
        }
        XCTAssertEqual(output, plaintext)
    }

    /// Runs `body` `iterations` times per round, fifteen rounds after one
    /// warm-up round, and prints the fastest and the median round per call.
    /// Time is this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so other
    /// processes competing for the CPUs inflate it far less than wall time.
    private func report(_ label: String, iterations: Int, _ body: () throws -> Void) rethrows {
        var rounds: [Double] = []
        for round in 0..<16 {
            let start = Self.threadCPUNanoseconds()
            for _ in 0..<iterations { try body() }
            let elapsed = Self.threadCPUNanoseconds() - start
            if round > 0 { rounds.append(Double(elapsed) / Double(iterations)) }
        }
        rounds.sort()
        let format = { (value: Double) in String(format: "%.0f", value) }
        print("benchmark: \(label): min \(format(rounds[0])) ns/op, median \(format(rounds[rounds.count / 2])) ns/op")
    }

    private static func threadCPUNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
