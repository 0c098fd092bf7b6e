import CryptCore
import Foundation
import XCTest

/// Opening goes through ipsec-mb's VAES code on CPUs that have it
/// (``AESGCM/openingBackend``) and must agree with OpenSSL's sealing on
/// every message shape: lengths around the 16-byte block and the 4 KiB
/// chunk, associated data of any length, in place, and keys that change
/// between messages (the opener caches the expanded key by identity).
final class AESGCMOpeningBackendTests: XCTestCase {
    /// Whether /proc/cpuinfo lists every flag the VAES code needs.
    private var cpuHasVAESAVX512: Bool {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
              let flagsLine = info.split(separator: "\n").first(where: { $0.hasPrefix("flags") }) else { return false }
        let flags = Set(flagsLine.split(separator: " ").map(String.init))
        return ["avx512f", "avx512bw", "avx512vl", "avx512dq", "vaes", "vpclmulqdq"].allSatisfy(flags.contains)
    }

    func testOpeningBackend_FollowsTheCPU() {
        XCTAssertEqual(AESGCM.openingBackend, cpuHasVAESAVX512 ? "ipsec-mb (VAES)" : "OpenSSL")
    }

    func testOpen_AgreesWithSealOnEveryLengthAndAAD() throws {
        let gcm = try AESGCM()
        let sizes = Array(1...48) + [63, 64, 65, 127, 128, 129, 255, 256, 257, 4095, 4096, 4097, 8192, 65536 + 5]
        for size in sizes {
            for aadLength in [1, 12, 16, 17, 40] {
                let s = try SealedMessage(size: size, aad: try SecureRandom.bytes(aadLength), gcm: gcm)
                var output = [UInt8](repeating: 0xA5, count: size)
                try gcm.open(key: s.key, nonce: s.nonce, aad: s.aad, ciphertext: s.ciphertext, tag: s.tag, into: &output)
                XCTAssertEqual(output, s.plaintext, "size \(size), aad \(aadLength)")
            }
        }
    }

    func testOpen_InPlace() throws {
        let gcm = try AESGCM()
        for size in [1, 4096, 4111] {
            let s = try SealedMessage(size: size, aad: Array("chunk 7".utf8), gcm: gcm)
            var buffer = s.ciphertext
            try buffer.withUnsafeMutableBytes { b in
                try s.nonce.withUnsafeBytes { n in
                    try s.aad.withUnsafeBytes { a in
                        try s.tag.withUnsafeBytes { t in
                            try gcm.open(key: s.key, nonce: n, aad: a, ciphertext: UnsafeRawBufferPointer(b), tag: t, into: b)
                        }
                    }
                }
            }
            XCTAssertEqual(buffer, s.plaintext, "size \(size)")
        }
    }

    func testOpen_KeysChangingBetweenMessages() throws {
        let gcm = try AESGCM()
        let first = try SealedMessage(size: 4096, aad: [1], gcm: gcm)
        let second = try SealedMessage(size: 4096, aad: [2], gcm: gcm)
        // The same key bytes in another object: the opener must expand it
        // again or reuse an equal expansion, never a stale one.
        let firstAgain = try first.key.withUnsafeBytes { try SymmetricKey(copying: $0) }
        for (message, key) in [(first, first.key), (second, second.key), (first, firstAgain), (second, second.key)] {
            var output = [UInt8](repeating: 0, count: 4096)
            try gcm.open(key: key, nonce: message.nonce, aad: message.aad, ciphertext: message.ciphertext, tag: message.tag,
                         into: &output)
            XCTAssertEqual(output, message.plaintext)
        }
        // The previous key with the next message's bytes fails.
        var output = [UInt8](repeating: 0xA5, count: 4096)
        XCTAssertThrowsCryptError(.authenticationFailure, "wrong key") {
            try gcm.open(key: first.key, nonce: second.nonce, aad: second.aad, ciphertext: second.ciphertext,
                         tag: second.tag, into: &output)
        }
        XCTAssertTrue(output.allSatisfy { $0 == 0 }, "output buffer not wiped")
    }
}
