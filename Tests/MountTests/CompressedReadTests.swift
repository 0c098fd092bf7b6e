import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Reads of compressed bundles (`encfs-pack --compress zstd`) through a real
/// mount, at every chunk size, compared with the source: reads inside one
/// chunk, across chunk boundaries, after the worker's cache of inflated
/// chunks hit and missed, and several files read in turn at the same
/// offsets, so that a cache that mixed up files or chunks would answer
/// with the wrong bytes.
final class CompressedReadTests: ToolTestCase {
    /// `n` bytes of compressible text, different for each `seed`.
    private func text(_ n: Int, seed: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(n + 100)
        var i = seed * 7919
        while out.count < n {
            out += Array("{\"seed\": \(seed), \"row\": \(i), \"name\": \"item \(i % 31)\"},\n".utf8)
            i += 1
        }
        return Array(out[0..<n])
    }

    /// Reads, with `O_DIRECT` so that each reaches the daemon, the files
    /// argv[3:] (relative to the mount argv[1] and to the source argv[2])
    /// at the same offsets in turn: for each of 150 seeded positions, a
    /// read there in every file (a miss, then the other files' misses),
    /// one just after it in the first file (a hit, or the chunk after),
    /// the first file again (a hit while two files share the worker's two
    /// slots), and reads that cross into the next chunk. Prints `ok N` or
    /// the first mismatch.
    private static let interleavedReads = """
        import mmap, os, random, sys
        mnt, src, names = sys.argv[1], sys.argv[2], sys.argv[3:]
        cs = int(os.environ['CS'])
        fds = [os.open(os.path.join(mnt, n), os.O_RDONLY | os.O_DIRECT) for n in names]
        data = [open(os.path.join(src, n), 'rb').read() for n in names]
        size = len(data[0])
        buf = mmap.mmap(-1, 4 * cs + 8192)
        rng = random.Random(14)
        checked = 0
        def check(i, off, n):
            global checked
            got = os.preadv(fds[i], [memoryview(buf)[:n]], off)
            want = data[i][off:off + n]
            if buf[:got] != want:
                print('mismatch', names[i], off, n, got)
                sys.exit(1)
            checked += 1
        for _ in range(150):
            off = rng.randrange(0, size)
            n = rng.choice([1, 100, 4096, cs // 2, cs - 1])
            for i in range(len(names)):
                check(i, off, n)
            check(0, min(off + n, size - 1), rng.choice([1, 4096, 3 * cs]))
            check(0, off, n)
            check(len(names) - 1, off, n)
            edge = (off // cs + 1) * cs
            if edge < size:
                check(1, max(edge - 10, 0), 20)
                check(0, max(edge - 10, 0), 2 * cs + 20)
        print('ok', checked)
        """

    /// At each chunk size: files A, B and C of the same size and different
    /// text, D a copy of A (a shared body), E random bytes (stored raw),
    /// read in turn by one worker thread (`--threads 1`: one cache sees
    /// every read).
    func testRandomReads_EachChunkSize_InterleavedFilesMatchSource() throws {
        let source = try scratch.makeDirectory("src")
        let size = 300_001
        var generator = SeededGenerator(seed: 140)
        try scratch.write("src/a.json", text(size, seed: 1))
        try scratch.write("src/b.json", text(size, seed: 2))
        try scratch.write("src/c.json", text(size, seed: 3))
        try scratch.write("src/d.json", text(size, seed: 1))
        try scratch.write("src/e.bin", generator.bytes(size))
        let key = try makeKeyFile()
        for (label, chunkSize) in [("4K", 4096), ("16K", 16384), ("32K", 32768), ("64K", 65536), ("1M", 1 << 20)] {
            let bundle = scratch.url("z\(label).encfs")
            try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd", "--chunk-size", label])
            let mounted = try mount(bundle, keyFile: key, options: ["--threads", "1"])
            defer { unmount(mounted) }
            for order in [["a.json", "b.json", "c.json", "d.json"], ["e.bin", "a.json", "d.json"]] {
                let result = try python(Self.interleavedReads, [mounted.mountpoint, source] + order,
                                        environment: ["CS": String(chunkSize)], timeout: 300)
                XCTAssertEqual(result.status, 0, "\(label) \(order): \(result.summary)")
                XCTAssertTrue(result.output.hasPrefix("ok "), "\(label) \(order): \(result.output)")
            }
        }
    }
}
