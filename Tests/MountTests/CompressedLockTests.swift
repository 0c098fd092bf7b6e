import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A lock wipes the plaintext a mount of a compressed bundle holds beyond
/// the reply buffer: the chunks its workers inflated for partial reads
/// (kept so the next read inside them is a copy), and whatever libzstd
/// held while inflating them.
final class CompressedLockTests: LockTestCase {
    /// A 4 KiB read at the start of a 64 KiB chunk inflates the whole
    /// chunk into the worker's cache; a marker in the middle of that chunk
    /// is then in the daemon's memory (the control) and must be gone after
    /// the lock. The read is `O_DIRECT`, so the reply buffer never held the
    /// marker.
    func testLock_InflatedChunksWiped() throws {
        try requireRoot()
        let compressedSource = try scratch.makeDirectory("zsrc")
        var generator = SeededGenerator(seed: 1414)
        let marker = generator.bytes(48)
        var notes: [UInt8] = []
        while notes.count < 200_000 { notes += Array("{\"note\": \(notes.count % 977), \"text\": \"lorem ipsum\"},\n".utf8) }
        notes.replaceSubrange(40_000..<(40_000 + marker.count), with: marker)
        try scratch.write("zsrc/notes.json", notes)
        let compressed = scratch.url("z.encfs")
        try packOrThrow(compressedSource, compressed, keyFile: key, ["--compress", "zstd", "--chunk-size", "64K"])

        try assertLockWipes(marker, of: compressed, keyFile: key, reading: "notes.json", expectedRead: "4096 {\n",
                            what: "an inflated chunk")
    }
}
