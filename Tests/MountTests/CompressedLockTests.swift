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
    /// Prints `found` or `absent`: whether the bytes argv[2] (hex) occur
    /// anywhere in the readable memory of process argv[1], and how much
    /// was searched.
    private static let searchMemory = """
        import sys
        pid, needle = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
        found, searched = False, 0
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split('-'))
                if 'r' not in fields[1] or (len(fields) > 5 and fields[5].startswith('[v')):
                    continue
                try:
                    mem.seek(lo)
                    data = mem.read(hi - lo)
                except OSError:
                    continue
                searched += len(data)
                found = found or needle in data
        print('searched', searched)
        print('found' if found else 'absent')
        """

    private func holds(_ pid: pid_t, _ needle: [UInt8]) throws -> Bool {
        let hex = needle.map { String(format: "%02x", $0) }.joined()
        let result = try python(Self.searchMemory, [String(pid), hex], timeout: 300)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        let lines = result.output.split(separator: "\n")
        let searched = lines.first { $0.hasPrefix("searched ") }.flatMap { Int($0.dropFirst(9)) } ?? 0
        XCTAssertGreaterThan(searched, 1 << 20, "the search read almost nothing: \(result.output)")
        return lines.contains("found")
    }

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

        let mounted = try mount(compressed, keyFile: key, options: ["--protection", "complete", "--threads", "1"])
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        let read = try python("""
            import mmap, os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
            buf = mmap.mmap(-1, 4096)
            print(os.preadv(fd, [buf], 0), buf[:1].decode())
            """, [mounted.path("notes.json")])
        XCTAssertEqual(read.output, "4096 {\n", read.summary)
        XCTAssertTrue(try holds(pid, marker), "the search does not find the inflated chunk while unlocked")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertFalse(try holds(pid, marker), "an inflated chunk's plaintext is left in the daemon's memory after lock")
    }
}
