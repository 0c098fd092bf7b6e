import CryptCore
import Foundation
import XCTest

/// Published test vectors, stored as JSON under `Vectors/` and copied into
/// the test bundle. Every file was cross-checked against an independent
/// implementation by `Scripts/verify-crypt-vectors.py` before it was
/// committed; a malformed file fails the test that loads it.
enum TestVectors {
    /// One file: where the vectors come from, and the vectors.
    struct File<Vector: Decodable>: Decodable {
        let algorithm: String
        let source: String
        let vectors: [Vector]
    }

    /// An AES-256-GCM vector. `valid == false` means `open` must refuse it.
    struct AESGCM: Decodable {
        let name: String
        let key: Hex
        let iv: Hex
        let aad: Hex
        let plaintext: Hex
        let ciphertext: Hex
        let tag: Hex
        let valid: Bool
    }

    /// An HKDF-SHA256 vector; the output length is `okm.bytes.count`.
    struct HKDF: Decodable {
        let name: String
        let ikm: Hex
        let salt: Hex
        let info: Hex
        let okm: Hex
    }

    /// A scrypt vector; the output length is `derived.bytes.count`.
    struct Scrypt: Decodable {
        let name: String
        let passphrase: Hex
        let salt: Hex
        let logN: UInt8
        let r: UInt32
        let p: UInt32
        let derived: Hex
    }

    /// An HMAC-SHA256 vector.
    struct HMAC: Decodable {
        let name: String
        let key: Hex
        let data: Hex
        let mac: Hex
    }

    /// An X25519 vector: `privateKey` (a scalar, clamped by X25519 itself)
    /// with `peerPublicKey` gives `sharedSecret`; `publicKey`, when present,
    /// is the private key's own public key.
    struct X25519: Decodable {
        let name: String
        let privateKey: Hex
        let publicKey: Hex?
        let peerPublicKey: Hex
        let sharedSecret: Hex
    }

    /// A low-order X25519 public key: every private key gives an all-zero
    /// shared secret with it, so key agreement must refuse it.
    struct X25519LowOrder: Decodable {
        let name: String
        let publicKey: Hex
    }

    /// A SHA-256 vector.
    struct SHA256: Decodable {
        let name: String
        let message: Hex
        let digest: Hex
    }

    /// Bytes written in the data files as a lowercase or uppercase hex string.
    struct Hex: Decodable, CustomStringConvertible {
        let bytes: [UInt8]

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let bytes = [UInt8](hex: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a hex string: \(text)")
            }
            self.bytes = bytes
        }

        var description: String { bytes.hexString }
    }

    /// Loads `Vectors/<name>.json` from the test bundle.
    ///
    /// - Throws: when the file is missing or does not decode.
    static func load<Vector: Decodable>(_ name: String, as _: Vector.Type) throws -> File<Vector> {
        let url = try XCTUnwrap(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Vectors"),
                                "missing test vector file Vectors/\(name).json")
        return try JSONDecoder().decode(File<Vector>.self, from: Data(contentsOf: url))
    }
}

extension Array where Element == UInt8 {
    /// Parses a hex string; nil when it has an odd length or a non-hex digit.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Lowercase hex, for failure messages.
    var hexString: String {
        map { byte in
            let s = String(byte, radix: 16)
            return byte < 16 ? "0" + s : s
        }.joined()
    }
}

/// Small helpers shared by the CryptCore tests.
enum TestSupport {
    /// A key holding exactly `bytes` (which must be 32 long).
    static func key(_ bytes: [UInt8]) throws -> SymmetricKey {
        try bytes.withUnsafeBytes { try SymmetricKey(copying: $0) }
    }

    /// True when every byte of `buffer` is zero.
    static func isAllZero(_ buffer: UnsafeRawBufferPointer) -> Bool {
        buffer.allSatisfy { $0 == 0 }
    }

    /// Copies the contents of secure storage into an array (test use only).
    static func bytes(of secret: SecureBytes) -> [UInt8] {
        secret.withUnsafeBytes { Array($0) }
    }
}

/// Asserts that `body` throws exactly `expected`.
func XCTAssertThrowsCryptError(_ expected: CryptError, _ message: @autoclosure () -> String = "",
                               file: StaticString = #filePath, line: UInt = #line,
                               _ body: () throws -> Void) {
    do {
        try body()
        XCTFail("expected \(expected), nothing was thrown. \(message())", file: file, line: line)
    } catch let error as CryptError {
        XCTAssertEqual(error, expected, message(), file: file, line: line)
    } catch {
        XCTFail("expected \(expected), got \(error). \(message())", file: file, line: line)
    }
}

/// Asserts that `body` throws `CryptError.invalidParameter` (any message:
/// the text is for people, not part of the contract).
func XCTAssertThrowsInvalidParameter(_ message: @autoclosure () -> String = "",
                                     file: StaticString = #filePath, line: UInt = #line,
                                     _ body: () throws -> Void) {
    do {
        try body()
        XCTFail("expected CryptError.invalidParameter, nothing was thrown. \(message())", file: file, line: line)
    } catch CryptError.invalidParameter {
        // expected
    } catch {
        XCTFail("expected CryptError.invalidParameter, got \(error). \(message())", file: file, line: line)
    }
}
