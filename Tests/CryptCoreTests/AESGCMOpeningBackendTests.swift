@testable import CryptCore
import Foundation
import XCTest

/// Opening goes through ipsec-mb on CPUs where one of its codes runs
/// (``AESGCM/openingBackend``: VAES with AVX-512, else AES-NI with AVX) and
/// must agree with OpenSSL's sealing on every message shape: lengths around
/// the 16-byte block and the 4 KiB chunk, associated data of any length, in
/// place, and keys that change between messages (the opener caches the
/// expanded key by identity). Every code the CPU runs is also checked on
/// its own, so a machine with AVX-512 tests the AVX code too.
final class AESGCMOpeningBackendTests: XCTestCase {
    /// The flags /proc/cpuinfo lists for the first CPU.
    private var cpuFlags: Set<String> {
        guard let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
              let flagsLine = info.split(separator: "\n").first(where: { $0.hasPrefix("flags") }) else { return [] }
        return Set(flagsLine.split(separator: " ").map(String.init))
    }

    func testOpeningBackend_FollowsTheCPU() {
        let flags = cpuFlags
        let expected = if ["avx512f", "avx512bw", "avx512vl", "avx512dq", "vaes", "vpclmulqdq"].allSatisfy(flags.contains) {
            "ipsec-mb (VAES)"
        } else if ["aes", "pclmulqdq", "avx"].allSatisfy(flags.contains) {
            "ipsec-mb (AVX)"
        } else {
            "OpenSSL"
        }
        XCTAssertEqual(AESGCM.openingBackend, expected)
    }

    /// Every ipsec-mb code this CPU runs opens what OpenSSL sealed, in place
    /// too, and refuses a flipped bit anywhere with the output wiped.
    func testEveryCodeThatRunsHere_AgreesWithSealAndRefusesTampering() throws {
        let codes = IPSecGCMOpener.Code.allCases.filter(\.runsHere)
        try XCTSkipIf(codes.isEmpty, "this CPU runs neither ipsec-mb code (no AES-NI with AVX): OpenSSL opens everything")
        let gcm = try AESGCM()
        for code in codes {
            let opener = IPSecGCMOpener(code: code)
            for size in [1, 15, 16, 17, 255, 4095, 4096, 4097, 65536 + 5] {
                for aadLength in [1, 17, 40] {
                    var s = try SealedMessage(size: size, aad: try SecureRandom.bytes(aadLength), gcm: gcm)
                    XCTAssertEqual(open(s, with: opener), s.plaintext, "\(code), size \(size), aad \(aadLength)")
                    XCTAssertEqual(open(s, with: opener, inPlace: true), s.plaintext, "\(code) in place, size \(size)")
                    s.ciphertext[size / 2] ^= 0x01
                    XCTAssertNil(open(s, with: opener), "\(code): a flipped ciphertext bit opened, size \(size)")
                    s.ciphertext[size / 2] ^= 0x01
                    s.aad[aadLength - 1] ^= 0x80
                    XCTAssertNil(open(s, with: opener), "\(code): a flipped associated-data bit opened")
                    s.aad[aadLength - 1] ^= 0x80
                    s.tag[15] ^= 0x01
                    XCTAssertNil(open(s, with: opener), "\(code): a flipped tag bit opened")
                }
            }
        }
    }

    /// `message` opened by `opener`: the plaintext, or nil when it refused
    /// (after checking that the output was wiped).
    private func open(_ message: SealedMessage, with opener: IPSecGCMOpener, inPlace: Bool = false) -> [UInt8]? {
        var output = inPlace ? message.ciphertext : [UInt8](repeating: 0xA5, count: message.ciphertext.count)
        let opened = output.withUnsafeMutableBytes { out in
            message.nonce.withUnsafeBytes { nonce in
                message.aad.withUnsafeBytes { aad in
                    message.tag.withUnsafeBytes { tag in
                        message.ciphertext.withUnsafeBytes { ciphertext in
                            opener.open(key: message.key, nonce: nonce, aad: aad,
                                        ciphertext: inPlace ? UnsafeRawBufferPointer(out) : ciphertext, tag: tag, into: out)
                        }
                    }
                }
            }
        }
        guard opened else {
            XCTAssertTrue(output.allSatisfy { $0 == 0 }, "output not wiped after a refusal")
            return nil
        }
        return output
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
