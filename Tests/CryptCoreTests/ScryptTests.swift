import CryptCore
import XCTest

/// scrypt against RFC 7914, and the parameter limits that keep a hostile
/// key slot from turning an open into a denial of service.
final class ScryptTests: XCTestCase {
    private func derive(_ passphrase: [UInt8], salt: [UInt8], _ parameters: Scrypt.Parameters, count: Int) throws -> [UInt8] {
        let out = try passphrase.withUnsafeBytes { p in
            try salt.withUnsafeBytes { s in
                try Scrypt.deriveKey(passphrase: p, salt: s, parameters: parameters, outputCount: count)
            }
        }
        return TestSupport.bytes(of: out)
    }

    func testVectors_RFC7914() throws {
        let file = try TestVectors.load("scrypt-rfc7914", as: TestVectors.Scrypt.self)
        XCTAssertEqual(file.vectors.count, 3)
        for v in file.vectors {
            let parameters = Scrypt.Parameters(logN: v.logN, r: v.r, p: v.p)
            XCTAssertNoThrow(try parameters.validate(), v.name)
            let derived = try derive(v.passphrase.bytes, salt: v.salt.bytes, parameters, count: v.derived.bytes.count)
            XCTAssertEqual(derived.hexString, v.derived.description, v.name)
        }
    }

    func testDefaultParameters_AreLogN17R8P1() throws {
        let parameters = Scrypt.Parameters.default
        XCTAssertEqual(parameters.logN, 17)
        XCTAssertEqual(parameters.r, 8)
        XCTAssertEqual(parameters.p, 1)
        XCTAssertNoThrow(try parameters.validate())
        XCTAssertEqual(parameters, Scrypt.Parameters(logN: 17, r: 8, p: 1))
        // 128 · 2^17 · 8 bytes = 128 MiB, plus the small B buffer.
        XCTAssertGreaterThanOrEqual(parameters.memoryBytes, 128 << 20)
        XCTAssertLessThan(parameters.memoryBytes, 129 << 20)
    }

    func testValidate_RejectsLogNOutOfRange() {
        for logN: UInt8 in [0, 31, 32, 63, 255] {
            XCTAssertThrowsInvalidParameter("logN \(logN)") { try Scrypt.Parameters(logN: logN, r: 1, p: 1).validate() }
        }
    }

    func testValidate_RejectsZeroR() {
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 10, r: 0, p: 1).validate() }
    }

    func testValidate_RejectsZeroP() {
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 10, r: 8, p: 0).validate() }
    }

    func testValidate_RejectsRTimesPAtLeast2To30() {
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 1, r: 1 << 15, p: 1 << 15).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 1, r: 1, p: 1 << 30).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 1, r: .max, p: .max).validate() }
    }

    func testValidate_RejectsMemoryAbove2GiB() {
        // 128 · 2^21 · 8 = 2 GiB for V alone; with B on top it is over.
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 21, r: 8, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 20, r: 16, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 30, r: 1, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 22, r: 8, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 2, r: 1, p: (1 << 24)).validate() }
    }

    func testValidate_RejectsNNotBelow2To16R() {
        // RFC 7914 section 2: N must be less than 2^(128 * r / 8). Only r = 1
        // can hit this below the logN <= 30 limit; OpenSSL refuses such
        // parameters, so validate() must refuse them first.
        XCTAssertNoThrow(try Scrypt.Parameters(logN: 15, r: 1, p: 1).validate())
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 16, r: 1, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 20, r: 1, p: 1).validate() }
        XCTAssertNoThrow(try Scrypt.Parameters(logN: 16, r: 2, p: 1).validate())
    }

    func testValidate_HostileParametersThrowInsteadOfTrapping() {
        // r · p < 2^30 holds, but 128 · N · r overflows 64 bits: a corrupt key
        // slot must produce an error, never an arithmetic-overflow trap.
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 30, r: 1 << 29, p: 1).validate() }
        XCTAssertThrowsInvalidParameter { try Scrypt.Parameters(logN: 30, r: (1 << 30) - 1, p: 1).validate() }
        XCTAssertEqual(Scrypt.Parameters(logN: 30, r: 1 << 29, p: 1).memoryBytes, .max)
        XCTAssertEqual(Scrypt.Parameters(logN: 200, r: 1, p: 1).memoryBytes, .max)
    }

    func testDeriveKey_EveryAcceptedEdgeDerives() throws {
        // Whatever validate() accepts, deriveKey must run: no late OpenSSL
        // refusal. Large r with tiny N is where OpenSSL's own accounting
        // (128 · r · (N + 2) + 128 · r · p) exceeds 128 · N · r the most.
        for parameters in [Scrypt.Parameters(logN: 1, r: 1, p: 1), Scrypt.Parameters(logN: 15, r: 1, p: 1),
                           Scrypt.Parameters(logN: 1, r: 4097, p: 1), Scrypt.Parameters(logN: 1, r: 8192, p: 1),
                           Scrypt.Parameters(logN: 2, r: 1, p: 1000)] {
            XCTAssertNoThrow(try parameters.validate(), "\(parameters)")
            XCTAssertEqual(try derive([1, 2, 3], salt: [4, 5], parameters, count: 32).count, 32, "\(parameters)")
        }
    }

    func testValidate_AcceptsLargeButAllowedMemory() {
        // 1 GiB: accepted (validate only; not derived here).
        XCTAssertNoThrow(try Scrypt.Parameters(logN: 20, r: 8, p: 1).validate())
        XCTAssertNoThrow(try Scrypt.Parameters(logN: 1, r: 1, p: 1).validate())
    }

    func testDeriveKey_InvalidParametersThrowBeforeDeriving() {
        // Would need 4 GiB if it ran; must be refused up front.
        XCTAssertThrowsInvalidParameter {
            _ = try derive(Array("pw".utf8), salt: [1], Scrypt.Parameters(logN: 22, r: 8, p: 1), count: 32)
        }
        XCTAssertThrowsInvalidParameter {
            _ = try derive(Array("pw".utf8), salt: [1], Scrypt.Parameters(logN: 0, r: 8, p: 1), count: 32)
        }
    }

    func testDeriveKey_DifferentSaltOrPassphraseDiffers() throws {
        let parameters = Scrypt.Parameters(logN: 4, r: 1, p: 1)
        let a = try derive(Array("passphrase".utf8), salt: [1, 2, 3], parameters, count: 32)
        XCTAssertEqual(a, try derive(Array("passphrase".utf8), salt: [1, 2, 3], parameters, count: 32))
        XCTAssertNotEqual(a, try derive(Array("passphrase".utf8), salt: [1, 2, 4], parameters, count: 32))
        XCTAssertNotEqual(a, try derive(Array("passphrasf".utf8), salt: [1, 2, 3], parameters, count: 32))
    }
}
