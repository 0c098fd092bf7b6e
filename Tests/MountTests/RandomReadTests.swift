import Foundation
import SharedTestSupport
import XCTest

/// Random `pread`s through the mount, compared byte for byte with the
/// source file.
///
/// Offsets cluster around chunk boundaries (k·cs ± 300) half of the time;
/// lengths mix tiny, page-sized, chunk-sized and multi-chunk reads, and some
/// run past the end of the file. Before every read the page cache of the
/// mounted file is dropped (`posix_fadvise(DONTNEED)`), so each read reaches
/// the daemon instead of pages the kernel kept (`keep_cache`).
///
/// Each run draws a seed for the file's contents and the reads and prints
/// it; `ENCFS_TEST_SEED=N` replays a run.
final class RandomReadTests: ToolTestCase {
    /// The seed of this run: `ENCFS_TEST_SEED` when set (to replay a
    /// failure), else a fresh one.
    static let seed: UInt32 = {
        if let text = ProcessInfo.processInfo.environment["ENCFS_TEST_SEED"], let seed = UInt32(text) { return seed }
        return UInt32.random(in: 1...UInt32.max)
    }()

    /// argv: source, mounted file, chunk size, reads, seed, threads.
    /// Prints "reads=N bytes=M", or the first mismatches and exits 1.
    static let checker = #"""
import os, random, sys, threading
src, mnt, cs, count, seed, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
want = open(src, "rb").read()
size = len(want)
fd = os.open(mnt, os.O_RDONLY)
lengths = [1, 2, 15, 16, 17, 4095, 4096, 4097, cs - 1, cs, cs + 1, 2 * cs + 5, 3 * cs, 1 << 20, (1 << 20) + 7]
errors = []
done = [0, 0]
lock = threading.Lock()
def worker(index):
    rng = random.Random(seed * 1000 + index)
    for _ in range(count // threads):
        if rng.random() < 0.5:
            boundary = rng.randrange(0, size // cs + 2) * cs
            offset = max(0, boundary + rng.randrange(-300, 300))
        else:
            offset = rng.randrange(0, size + 100)
        length = rng.choice(lengths) if rng.random() < 0.6 else rng.randrange(1, 300_000)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            got = os.pread(fd, length, offset)
        except OSError as e:
            with lock:
                errors.append("pread(%d, %d): %s" % (length, offset, e))
            continue
        expected = want[offset:offset + length]
        with lock:
            done[0] += 1
            done[1] += len(got)
            if got != expected:
                first = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]), min(len(got), len(expected)))
                errors.append("pread(len=%d, off=%d): got %d bytes, want %d; first difference at +%d" % (length, offset, len(got), len(expected), first))
ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
if errors:
    print("\n".join(errors[:20]))
    print("%d of %d reads wrong" % (len(errors), count))
    sys.exit(1)
print("reads=%d bytes=%d" % (done[0], done[1]))
"""#

    /// Packs one random file of `size` bytes with `chunkArguments`, mounts
    /// it, and runs the checker.
    private func check(size: Int, chunkSize: Int, chunkArguments: [String], reads: Int, threads: Int,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        // Printed first, so a run that hangs or crashes still names it.
        report("seed \(Self.seed) (replay: ENCFS_TEST_SEED=\(Self.seed))")
        let source = try scratch.makeDirectory("src")
        try check(Tools.python, ["-c", "import random,sys; open(sys.argv[1],'wb').write(random.Random(int(sys.argv[3])).randbytes(int(sys.argv[2])))",
                                 "\(source)/data", String(size), String(Self.seed)])
        let key = try makeKeyFile()
        let bundle = scratch.url("random.encfs")
        try packOrThrow(source, bundle, keyFile: key, chunkArguments)
        let mounted = try mount(bundle, keyFile: key)
        let start = ContinuousClock.now
        let result = try python(Self.checker, ["\(source)/data", mounted.path("data"), String(chunkSize), String(reads),
                                               String(Self.seed), String(threads)])
        XCTAssertEqual(result.status, 0, "seed \(Self.seed): " + result.output + result.errorOutput, file: file, line: line)
        XCTAssertTrue(result.output.hasPrefix("reads=\(reads / threads * threads) "), result.output, file: file, line: line)
        report("\(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) in \(String(format: "%.2f", seconds(since: start))) s")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("error") }, [], file: file, line: line)
    }

    /// The mount keeps no per-open state (the kernel skips open and
    /// release); each read finds its file's key in a small per-workspace
    /// cache. One thread reading 13 open files in turn, with the page cache
    /// dropped before every read, cycles that cache through every slot.
    func testInterleavedFiles_OneThread_EachReadGetsItsOwnFile() throws {
        let source = try scratch.makeDirectory("src")
        try check(Tools.python, ["-c", """
            import os, sys
            for i in range(13):
                open("%s/f%02d" % (sys.argv[1], i), "wb").write(os.urandom(200000 + i * 4099))
            """, source])
        let key = try makeKeyFile()
        let bundle = scratch.url("files.encfs")
        try packOrThrow(source, bundle, keyFile: key, [])
        let mounted = try mount(bundle, keyFile: key)
        let result = try python("""
            import os, random, sys
            src, mnt = sys.argv[1], sys.argv[2]
            names = sorted(os.listdir(src))
            want = [open(os.path.join(src, n), "rb").read() for n in names]
            fds = [os.open(os.path.join(mnt, n), os.O_RDONLY) for n in names]
            rng = random.Random(5)
            wrong = 0
            for k in range(3000):
                i = k % len(fds) if k < 1500 else rng.randrange(len(fds))
                offset = rng.randrange(0, len(want[i]))
                length = rng.choice([1, 4096, 70000])
                os.posix_fadvise(fds[i], 0, 0, os.POSIX_FADV_DONTNEED)
                if os.pread(fds[i], length, offset) != want[i][offset:offset + length]:
                    wrong += 1
            print("wrong=%d" % wrong)
            """, [source, mounted.path("")])
        XCTAssertEqual(result.status, 0, result.errorOutput)
        XCTAssertEqual(result.output.trimmingCharacters(in: .whitespacesAndNewlines), "wrong=0")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("error") }, [])
    }

    func testRandomReads_DefaultChunks() throws {
        try check(size: 5 * 1 << 20 + 12345, chunkSize: 4096, chunkArguments: [], reads: 2000, threads: 1)
    }

    func testRandomReads_8KChunks() throws {
        try check(size: 3 * 1 << 20 + 7, chunkSize: 8192, chunkArguments: ["--chunk-size", "8K"], reads: 1000, threads: 1)
    }

    func testRandomReads_64KChunks() throws {
        try check(size: 5 * 1 << 20 + 12345, chunkSize: 65536, chunkArguments: ["--chunk-size", "64K"], reads: 1000, threads: 1)
    }

    func testRandomReads_LargestChunks() throws {
        try check(size: 5 * 1 << 20 + 1, chunkSize: 1 << 20, chunkArguments: ["--chunk-size", "1M"], reads: 500, threads: 1)
    }

    func testRandomReads_EightThreadsShareOneDescriptor() throws {
        try check(size: 4 * 1 << 20 + 999, chunkSize: 4096, chunkArguments: [], reads: 2000, threads: 8)
    }
}
