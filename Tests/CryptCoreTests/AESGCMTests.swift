import CryptCore
import XCTest

/// AES-256-GCM against published vectors, round trips at every size around
/// the 16-byte block and 4 KiB / 64 KiB boundaries, and size checking.
final class AESGCMTests: XCTestCase {
    /// Sizes on both sides of the block size and of typical chunk sizes.
    static let boundarySizes = [0, 1, 15, 16, 17, 31, 32, 33, 4095, 4096, 4097, 65535, 65536, 65537]

    // MARK: - Published vectors

    func testVectors_GCMSpecTestCases13To16() throws {
        let file = try TestVectors.load("aes-256-gcm-spec", as: TestVectors.AESGCM.self)
        XCTAssertEqual(file.vectors.count, 4)
        try file.vectors.forEach { try check($0) }
    }

    func testVectors_WycheproofThroughOneReusedContext() throws {
        // A reused context keeps its cipher and only changes key and nonce;
        // seal and open alternate, valid and invalid vectors interleave.
        let file = try TestVectors.load("aes-256-gcm-wycheproof", as: TestVectors.AESGCM.self)
        let shared = try AESGCM()
        for _ in 0..<2 {
            for vector in file.vectors { try check(vector, using: shared) }
        }
    }

    func testVectors_Wycheproof() throws {
        let file = try TestVectors.load("aes-256-gcm-wycheproof", as: TestVectors.AESGCM.self)
        XCTAssertEqual(file.vectors.count, 44)
        XCTAssertEqual(file.vectors.filter { !$0.valid }.count, 27, "the modified-tag vectors must be present")
        try file.vectors.forEach { try check($0) }
    }

    /// Seals (raw and array forms) and compares with the vector; opens and
    /// compares the plaintext; for an invalid vector, requires the open to
    /// fail with a wiped output buffer.
    private func check(_ v: TestVectors.AESGCM, using context: AESGCM? = nil) throws {
        let key = try TestSupport.key(v.key.bytes)
        let gcm = try context ?? AESGCM()
        let count = v.plaintext.bytes.count
        XCTAssertEqual(v.ciphertext.bytes.count, count, v.name)

        if v.valid {
            var ciphertext = [UInt8](repeating: 0, count: count)
            var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
            try v.iv.bytes.withUnsafeBytes { nonce in
                try v.aad.bytes.withUnsafeBytes { aad in
                    try v.plaintext.bytes.withUnsafeBytes { plaintext in
                        try ciphertext.withUnsafeMutableBytes { c in
                            try tag.withUnsafeMutableBytes { t in
                                try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: plaintext, into: c, tag: t)
                            }
                        }
                    }
                }
            }
            XCTAssertEqual(ciphertext.hexString, v.ciphertext.description, v.name)
            XCTAssertEqual(tag.hexString, v.tag.description, v.name)

            let sealed = try gcm.seal(key: key, nonce: v.iv.bytes, aad: v.aad.bytes,
                                      plaintext: SecureBytes(copying: v.plaintext.bytes))
            XCTAssertEqual(sealed.hexString, v.ciphertext.description + v.tag.description, v.name)
        }

        var plaintext = [UInt8](repeating: 0xA5, count: count)
        let result = Result<Void, any Error> {
            try v.iv.bytes.withUnsafeBytes { nonce in
                try v.aad.bytes.withUnsafeBytes { aad in
                    try v.ciphertext.bytes.withUnsafeBytes { c in
                        try v.tag.bytes.withUnsafeBytes { t in
                            try plaintext.withUnsafeMutableBytes { p in
                                try gcm.open(key: key, nonce: nonce, aad: aad, ciphertext: c, tag: t, into: p)
                            }
                        }
                    }
                }
            }
        }
        if v.valid {
            XCTAssertNoThrow(try result.get(), v.name)
            XCTAssertEqual(plaintext, v.plaintext.bytes, v.name)
            let opened = try (v.ciphertext.bytes + v.tag.bytes).withUnsafeBytes { sealed in
                try gcm.open(key: key, nonce: v.iv.bytes, aad: v.aad.bytes, sealed: sealed)
            }
            XCTAssertEqual(TestSupport.bytes(of: opened), v.plaintext.bytes, v.name)
        } else {
            XCTAssertThrowsCryptError(.authenticationFailure, v.name) { try result.get() }
            XCTAssertTrue(plaintext.withUnsafeBytes(TestSupport.isAllZero), "\(v.name): output not wiped")
        }
    }

    // MARK: - Round trips

    func testRoundTrip_OutOfPlaceAtBoundarySizes() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        for size in Self.boundarySizes {
            for aad in [[], try SecureRandom.bytes(size % 40)] {
                let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
                let message = try SecureRandom.bytes(size)
                var ciphertext = [UInt8](repeating: 0, count: size)
                var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
                try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: message, into: &ciphertext, tag: &tag)
                if size >= 16 { XCTAssertNotEqual(ciphertext, message, "size \(size): ciphertext equals plaintext") }

                var decrypted = [UInt8](repeating: 0xA5, count: size)
                try gcm.open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag, into: &decrypted)
                XCTAssertEqual(decrypted, message, "size \(size), aad \(aad.count)")
            }
        }
    }

    func testRoundTrip_InPlaceAtBoundarySizes() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let aad = Array("chunk 7".utf8)
        for size in Self.boundarySizes {
            let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
            let message = try SecureRandom.bytes(size)

            // The out-of-place result is the reference for the in-place one.
            var expected = [UInt8](repeating: 0, count: size)
            var expectedTag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
            try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: message, into: &expected, tag: &expectedTag)

            var buffer = message
            var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
            try buffer.withUnsafeMutableBytes { b in
                try nonce.withUnsafeBytes { n in
                    try aad.withUnsafeBytes { a in
                        try tag.withUnsafeMutableBytes { t in
                            try gcm.seal(key: key, nonce: n, aad: a, plaintext: UnsafeRawBufferPointer(b), into: b, tag: t)
                        }
                    }
                }
            }
            XCTAssertEqual(buffer, expected, "size \(size): in-place ciphertext differs")
            XCTAssertEqual(tag, expectedTag, "size \(size): in-place tag differs")

            try buffer.withUnsafeMutableBytes { b in
                try nonce.withUnsafeBytes { n in
                    try aad.withUnsafeBytes { a in
                        try tag.withUnsafeBytes { t in
                            try gcm.open(key: key, nonce: n, aad: a, ciphertext: UnsafeRawBufferPointer(b), tag: t, into: b)
                        }
                    }
                }
            }
            XCTAssertEqual(buffer, message, "size \(size): in-place open")
        }
    }

    func testRoundTrip_ArrayFormsAtBoundarySizes() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let aad = Array("header".utf8)
        for size in Self.boundarySizes {
            let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
            let message = try SecureBytes.random(count: size)
            let sealed = try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: message)
            XCTAssertEqual(sealed.count, size + AESGCM.tagByteCount)
            let opened = try sealed.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
            XCTAssertTrue(opened == message, "size \(size)")
        }
    }

    func testRoundTrip_OneContextManyKeys() throws {
        // A context is reused across keys and across a failed open.
        let gcm = try AESGCM()
        let nonce = [UInt8](repeating: 7, count: AESGCM.nonceByteCount)
        let message = try SecureBytes.random(count: 100)
        for _ in 0..<20 {
            let key = try SymmetricKey.random()
            let sealed = try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: message)
            var tampered = sealed
            tampered[0] ^= 1
            XCTAssertThrowsCryptError(.authenticationFailure) {
                _ = try tampered.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: [], sealed: $0) }
            }
            let opened = try sealed.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: [], sealed: $0) }
            XCTAssertTrue(opened == message)
        }
    }

    func testReusedContext_SameKeyRunsMatchFreshContexts() throws {
        // A context skips the key schedule when the same key storage comes
        // again (runs of chunks of one file). Runs of one key, key switches,
        // direction switches, copies of a key and a failed open in the
        // middle must all give exactly what a fresh context gives.
        let shared = try AESGCM()
        let keys = try (0..<3).map { _ in try SymmetricKey.random() }
        let message = try SecureBytes.random(count: 4097)
        let aad: [UInt8] = [1, 2, 3]
        let schedule = [0, 0, 0, 1, 1, 0, 2, 2, 2, 2, 1, 0, 0]
        for (step, k) in schedule.enumerated() {
            var nonce = [UInt8](repeating: 0, count: AESGCM.nonceByteCount)
            nonce[11] = UInt8(step)
            // Every third step uses a copy: the same bytes in new storage,
            // which the context must install again rather than trust.
            let key = step % 3 == 2 ? try keys[k].withUnsafeBytes { try SymmetricKey(copying: $0) } : keys[k]
            let expected = try AESGCM().seal(key: key, nonce: nonce, aad: aad, plaintext: message)
            let sealed = try shared.seal(key: key, nonce: nonce, aad: aad, plaintext: message)
            XCTAssertEqual(sealed, expected, "step \(step): seal differs from a fresh context")
            if step % 4 == 1 {
                var tampered = sealed
                tampered[tampered.count - 1] ^= 0x80
                XCTAssertThrowsCryptError(.authenticationFailure) {
                    _ = try tampered.withUnsafeBytes { try shared.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
                }
            }
            let opened = try sealed.withUnsafeBytes { try shared.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
            XCTAssertTrue(opened == message, "step \(step): open through the reused context")
            let other = keys[(k + 1) % keys.count]
            XCTAssertThrowsCryptError(.authenticationFailure) {
                _ = try sealed.withUnsafeBytes { try shared.open(key: other, nonce: nonce, aad: aad, sealed: $0) }
            }
        }
    }

    func testReusedContext_KeyFreedAndReplaced_IsInstalled() throws {
        // The context remembers its key by identity. A key freed right after
        // use and a new one allocated in its place (often at the same
        // address) must still get its own schedule: a fresh context opens
        // every message the reused one seals.
        let shared = try AESGCM()
        let nonce = [UInt8](repeating: 9, count: AESGCM.nonceByteCount)
        let message = try SecureBytes.random(count: 64)
        for round in 0..<200 {
            let sealed: [UInt8]
            let keyBytes: [UInt8]
            do {
                let key = try SymmetricKey.random()
                keyBytes = key.withUnsafeBytes { Array($0) }
                sealed = try shared.seal(key: key, nonce: nonce, aad: [], plaintext: message)
            }
            let sameBytes = try TestSupport.key(keyBytes)
            let opened = try sealed.withUnsafeBytes { try AESGCM().open(key: sameBytes, nonce: nonce, aad: [], sealed: $0) }
            XCTAssertTrue(opened == message, "round \(round)")
        }
    }

    // MARK: - Size errors

    func testSeal_WrongNonceLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        for length in [0, 8, 11, 13, 16] {
            var c = [UInt8](repeating: 0, count: 10)
            var t = [UInt8](repeating: 0, count: 16)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "nonce", expected: 12, actual: length)) {
                try gcm.seal(key: key, nonce: [UInt8](repeating: 1, count: length), aad: [],
                             plaintext: [UInt8](repeating: 2, count: 10), into: &c, tag: &t)
            }
        }
    }

    func testOpen_WrongNonceLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        for length in [0, 11, 13] {
            var p = [UInt8](repeating: 0, count: 10)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "nonce", expected: 12, actual: length)) {
                try gcm.open(key: key, nonce: [UInt8](repeating: 1, count: length), aad: [],
                             ciphertext: [UInt8](repeating: 2, count: 10), tag: [UInt8](repeating: 0, count: 16), into: &p)
            }
        }
        // The array form checks the nonce too.
        XCTAssertThrowsCryptError(.invalidBufferSize(what: "nonce", expected: 12, actual: 8)) {
            _ = try [UInt8](repeating: 0, count: 32).withUnsafeBytes {
                try gcm.open(key: key, nonce: [UInt8](repeating: 0, count: 8), aad: [], sealed: $0)
            }
        }
        XCTAssertThrowsCryptError(.invalidBufferSize(what: "nonce", expected: 12, actual: 16)) {
            _ = try gcm.seal(key: key, nonce: [UInt8](repeating: 0, count: 16), aad: [], plaintext: SecureBytes(copying: [1, 2]))
        }
    }

    func testSeal_WrongTagLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let nonce = [UInt8](repeating: 0, count: 12)
        for length in [0, 12, 15, 17, 32] {
            var c = [UInt8](repeating: 0, count: 10)
            var t = [UInt8](repeating: 0, count: length)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "tag", expected: 16, actual: length)) {
                try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: [UInt8](repeating: 2, count: 10), into: &c, tag: &t)
            }
        }
    }

    func testOpen_WrongTagLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let nonce = [UInt8](repeating: 0, count: 12)
        for length in [0, 12, 15, 17] {
            var p = [UInt8](repeating: 0, count: 10)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "tag", expected: 16, actual: length)) {
                try gcm.open(key: key, nonce: nonce, aad: [], ciphertext: [UInt8](repeating: 2, count: 10),
                             tag: [UInt8](repeating: 0, count: length), into: &p)
            }
        }
    }

    func testSeal_MismatchedOutputLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let nonce = [UInt8](repeating: 0, count: 12)
        for (input, output) in [(10, 9), (10, 11), (0, 1), (16, 0)] {
            var c = [UInt8](repeating: 0, count: output)
            var t = [UInt8](repeating: 0, count: 16)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "output", expected: input, actual: output)) {
                try gcm.seal(key: key, nonce: nonce, aad: [], plaintext: [UInt8](repeating: 2, count: input), into: &c, tag: &t)
            }
        }
    }

    func testOpen_MismatchedOutputLengthThrows() throws {
        let key = try SymmetricKey.random()
        let gcm = try AESGCM()
        let nonce = [UInt8](repeating: 0, count: 12)
        for (input, output) in [(10, 9), (10, 11), (0, 1), (16, 0)] {
            var p = [UInt8](repeating: 0, count: output)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "output", expected: input, actual: output)) {
                try gcm.open(key: key, nonce: nonce, aad: [], ciphertext: [UInt8](repeating: 2, count: input),
                             tag: [UInt8](repeating: 0, count: 16), into: &p)
            }
        }
    }

    func testSizes_AreTheDocumentedConstants() {
        XCTAssertEqual(AESGCM.nonceByteCount, 12)
        XCTAssertEqual(AESGCM.tagByteCount, 16)
    }
}

// MARK: - Array adapters over the raw-buffer API

extension AESGCM {
    /// Seals `plaintext` with the raw-buffer API into `ciphertext` and `tag`.
    func seal(key: SymmetricKey, nonce: [UInt8], aad: [UInt8], plaintext: [UInt8],
              into ciphertext: inout [UInt8], tag: inout [UInt8]) throws {
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try plaintext.withUnsafeBytes { m in
                    try ciphertext.withUnsafeMutableBytes { c in
                        try tag.withUnsafeMutableBytes { t in
                            try seal(key: key, nonce: n, aad: a, plaintext: m, into: c, tag: t)
                        }
                    }
                }
            }
        }
    }

    /// Opens with the raw-buffer API into `plaintext`.
    func open(key: SymmetricKey, nonce: [UInt8], aad: [UInt8], ciphertext: [UInt8], tag: [UInt8],
              into plaintext: inout [UInt8]) throws {
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try ciphertext.withUnsafeBytes { c in
                    try tag.withUnsafeBytes { t in
                        try plaintext.withUnsafeMutableBytes { p in
                            try open(key: key, nonce: n, aad: a, ciphertext: c, tag: t, into: p)
                        }
                    }
                }
            }
        }
    }
}
