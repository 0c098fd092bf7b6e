import CryptCore
@testable import EncFS
import XCTest

extension Scrypt.Parameters {
    /// scrypt for tests: still real scrypt, at N = 2^14 (16 MiB) instead of
    /// the default 2^17, to keep the suite fast.
    static let testing = Scrypt.Parameters(logN: 14, r: 8, p: 1)
}

/// Deterministic secrets, so a failing run can be replayed.
enum TestSecrets {
    /// A raw key derived from `seed`; different seeds give different keys.
    static func key(_ seed: UInt64) -> SymmetricKey {
        var generator = SeededGenerator(seed: 0x6B65_7900_0000_0000 | seed)
        let raw = generator.bytes(SymmetricKey.byteCount)
        return try! raw.withUnsafeBytes { try SymmetricKey(copying: $0) } // 32 bytes: cannot fail
    }

    static func passphrase(_ text: String) -> SecureBytes { SecureBytes(copying: bytes(text)) }
}

/// Packs `source` into `destination` with the test scrypt cost, failing the
/// test on any warning (no test tree holds special files unless it says so).
@discardableResult
func packBundle(source: [UInt8], destination: [UInt8], chunkSizeLog2: UInt8 = 12, keys: [KeyMaterial],
                scrypt: Scrypt.Parameters = .testing, file: StaticString = #filePath, line: UInt = #line) throws -> PackSummary {
    var options = PackOptions()
    options.chunkSizeLog2 = chunkSizeLog2
    options.keys = keys
    options.scrypt = scrypt
    return try BundleWriter.pack(source: source, destination: destination, options: options) { message, path in
        XCTFail("unexpected warning: \(message) (\(path.debugPath))", file: file, line: line)
    }
}

extension BundleReader {
    /// The entry at `path` (fails the lookup with the library's error).
    func entry(_ path: [UInt8]) throws -> IndexEntry { try index.resolve(path: path) }

    /// The whole file, read with one call.
    func contents(of entry: IndexEntry) throws -> [UInt8] {
        let key = try fileKey(for: entry)
        var out = [UInt8](repeating: 0, count: Int(entry.size))
        let n = try out.withUnsafeMutableBytes { try read(entry, key: key, fromOffset: 0, into: $0) }
        XCTAssertEqual(n, out.count, "short read of a whole file")
        return out
    }

    func contents(of path: [UInt8]) throws -> [UInt8] { try contents(of: entry(path)) }

    /// Exactly the plaintext of chunk `chunk` (its range computed here from
    /// the chunk size, not by `ChunkLayout`).
    func chunk(_ chunk: UInt64, of entry: IndexEntry) throws -> [UInt8] {
        let cs = UInt64(1) << UInt64(header.layout.chunkSizeLog2)
        let start = chunk * cs
        let count = Int(min(cs, entry.size - start))
        var out = [UInt8](repeating: 0, count: count)
        let key = try fileKey(for: entry)
        let n = try out.withUnsafeMutableBytes { try read(entry, key: key, fromOffset: start, into: $0) }
        XCTAssertEqual(n, count)
        return out
    }
}

/// Where things sit in a bundle file, worked out from the byte layout
/// documented on `BundleHeader`, `KeySlot` and `ChunkLayout`, by hand, so a
/// tamper test hits the byte it means to.
struct BundleMap {
    /// Header length H (u32 at 12).
    let headerLength: Int
    /// Offset of each key slot's 4-byte slot header (slots start at 64).
    let slotOffsets: [Int]
    /// Kind byte of each slot.
    let slotKinds: [UInt8]
    /// Absolute offset and length of the sealed index.
    let indexOffset: Int
    let indexLength: Int
    /// Chunk size (2 ^ byte 32).
    let chunkSize: Int

    init(_ b: [UInt8]) {
        func le(_ at: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 | Int(b[at + $1]) << (8 * $1) } }
        headerLength = le(12, 4)
        chunkSize = 1 << Int(b[32])
        var offsets: [Int] = []
        var kinds: [UInt8] = []
        var at = 64
        for _ in 0..<Int(b[33]) {
            offsets.append(at)
            kinds.append(b[at])
            at += 4 + le(at + 2, 2)
        }
        slotOffsets = offsets
        slotKinds = kinds
        indexOffset = headerLength + le(48, 8)
        indexLength = le(56, 8)
    }

    /// Offset of the header MAC.
    var macOffset: Int { headerLength - 32 }

    /// Offset of a slot's body (after kind, reserved, length).
    func slotBody(_ slot: Int) -> Int { slotOffsets[slot] + 4 }

    /// Absolute offset of the sealed chunk `chunk` of a file entry: every
    /// chunk before it is chunk size + 16 bytes.
    func chunkOffset(_ entry: IndexEntry, chunk: Int) -> Int {
        headerLength + Int(entry.first) + chunk * (chunkSize + 16)
    }

    /// Sealed length of chunk `chunk` of a file entry (plaintext + 16-byte tag).
    func sealedLength(_ entry: IndexEntry, chunk: Int) -> Int {
        min(chunkSize, Int(entry.size) - chunk * chunkSize) + 16
    }
}
