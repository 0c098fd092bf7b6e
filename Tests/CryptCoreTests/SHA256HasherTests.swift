import CryptCore
import XCTest

/// `SHA256.Hasher` against the NIST vectors, given in pieces: the digest
/// must not depend on where the message is split.
final class SHA256HasherTests: XCTestCase {
    /// Every vector split at every point into two updates, and into three
    /// (a prefix, one byte, the rest), plus empty updates in between.
    func testHasher_NISTVectorsAtEverySplit() throws {
        let file = try TestVectors.load("sha256-nist", as: TestVectors.SHA256.self)
        XCTAssertEqual(file.vectors.count, 3)
        for v in file.vectors {
            let message = v.message.bytes
            for split in 0...message.count {
                let hasher = SHA256.Hasher()
                message[..<split].withUnsafeBytes { hasher.update($0) }
                hasher.update(UnsafeRawBufferPointer(start: nil, count: 0))
                message[split...].withUnsafeBytes { hasher.update($0) }
                XCTAssertEqual(hasher.finalize().hexString, v.digest.description, "\(v.name), split at \(split)")
            }
            for split in 0..<message.count {
                let hasher = SHA256.Hasher()
                message[..<split].withUnsafeBytes { hasher.update($0) }
                message[split..<(split + 1)].withUnsafeBytes { hasher.update($0) }
                message[(split + 1)...].withUnsafeBytes { hasher.update($0) }
                XCTAssertEqual(hasher.finalize().hexString, v.digest.description, "\(v.name), three pieces at \(split)")
            }
        }
    }

    /// FIPS 180-2 B.3 (one million "a") in pieces of uneven sizes that
    /// cross the 64-byte block boundary at every phase.
    func testHasher_OneMillionAInUnevenPieces() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        let hasher = SHA256.Hasher()
        var at = 0
        var size = 1
        message.withUnsafeBytes { all in
            while at < all.count {
                let n = min(size, all.count - at)
                hasher.update(UnsafeRawBufferPointer(rebasing: all[at..<(at + n)]))
                at += n
                size = size % 1000 + 37
            }
        }
        XCTAssertEqual(hasher.finalize().hexString, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// After `finalize` the hasher starts an empty message, so it can be
    /// reused; the one-shot hash agrees.
    func testHasher_FinalizeStartsANewMessage() {
        let hasher = SHA256.Hasher()
        Array("abc".utf8).withUnsafeBytes { hasher.update($0) }
        XCTAssertEqual(hasher.finalize().hexString, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hasher.finalize().hexString, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let data = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        data.withUnsafeBytes { hasher.update($0) }
        XCTAssertEqual(hasher.finalize(), data.withUnsafeBytes { SHA256.hash($0) })
    }
}
