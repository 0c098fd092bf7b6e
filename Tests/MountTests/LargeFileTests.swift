import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A file past 4 GiB: sizes and offsets must not wrap at 2^32 anywhere
/// between the source, the bundle, the kernel and the reader.
///
/// The source is sparse (4 GiB + 3 bytes, a few known non-zero bytes); the
/// bundle is not (every chunk is encrypted), so packing writes 4 GiB.
final class LargeFileTests: ToolTestCase {
    static let size: UInt64 = (1 << 32) + 3
    /// The default chunk size (4 KiB). The checker's windows around
    /// k·65536 are chunk boundaries for it too.
    static let chunk: UInt64 = 4096
    /// Offsets of the non-zero bytes: chunk edges near the start, 2^31 and
    /// 2^32, and the last byte.
    static let marks: [UInt64] = [0, 1, chunk - 1, chunk, (1 << 31) - 1, 1 << 31, (1 << 32) - chunk - 1,
                                  (1 << 32) - chunk, (1 << 32) - 2, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, (1 << 32) + 2]

    /// argv: file, then offsets. Reads windows around every mark and around
    /// chunk boundaries 65530…65537 (2^32 = chunk 65536), a 1 MiB read
    /// across 2^32, and reads at and past the end; compares with zeros plus
    /// byte (i·37 + 1) mod 256 at mark i. Prints "ok N".
    static let checker = #"""
import os, sys
path, marks = sys.argv[1], [int(x) for x in sys.argv[2:]]
size = (1 << 32) + 3
value = {m: (i * 37 + 1) % 256 for i, m in enumerate(marks)}
def expected(lo, hi):
    hi = min(hi, size)
    out = bytearray(max(0, hi - lo))
    for m, v in value.items():
        if lo <= m < hi:
            out[m - lo] = v
    return bytes(out)
fd = os.open(path, os.O_RDONLY)
assert os.fstat(fd).st_size == size, os.fstat(fd).st_size
checks = 0
def check(lo, length):
    global checks
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = os.pread(fd, length, lo)
    want = expected(lo, lo + length)
    assert got == want, "pread(%d, %d): got %d bytes %r..., want %d bytes %r..." % (length, lo, len(got), got[:16], len(want), want[:16])
    checks += 1
for m in marks:
    check(max(0, m - 5), 11)
    check(m, 1)
for k in range(65530, 65538):
    b = k * 65536
    check(b - 7, 14)
    check(b, 65536)
check((1 << 32) - (1 << 19), 1 << 20)
check(size - 3, 100)
check(size, 10)
check(size + 12345, 10)
check((1 << 33), 10)
print("ok", checks)
"""#

    func testFileBeyond4GiB_SizeAndBytesAtBoundaries() throws {
        let source = try scratch.makeDirectory("src")
        let huge = "\(source)/huge"
        try check("truncate", ["-s", String(Self.size), huge])
        try check(Tools.python, ["-c", """
        import os, sys
        fd = os.open(sys.argv[1], os.O_WRONLY)
        for i, m in enumerate(sys.argv[2:]):
            os.pwrite(fd, bytes([(i * 37 + 1) % 256]), int(m))
        """, huge] + Self.marks.map(String.init))
        try scratch.write("src/tiny", Array("tiny\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("large.encfs")
        let packSeconds = try packOrThrow(source, bundle, keyFile: key, timeout: 300)
        report("packed a sparse 4 GiB + 3 byte file in \(String(format: "%.2f", packSeconds)) s")
        let bundleSize = try BundleSurgery.size(of: bundle)
        // Every chunk costs its 16-byte tag on top of the plaintext.
        let chunks = (Self.size + Self.chunk - 1) / Self.chunk
        XCTAssertGreaterThan(bundleSize, Self.size + chunks * 16)

        let mounted = try mount(bundle, keyFile: key)
        report("mounted in \(String(format: "%.3f", mounted.secondsToServe)) s")
        let stat = try check("stat", ["-c", "%s", mounted.path("huge")])
        XCTAssertEqual(stat.output, "\(Self.size)\n")
        let du = try check("du", ["--apparent-size", "-B1", mounted.path("huge")])
        XCTAssertTrue(du.output.hasPrefix("\(Self.size)\t"), du.output)
        let start = ContinuousClock.now
        let result = try python(Self.checker, [mounted.path("huge")] + Self.marks.map(String.init))
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.output.hasPrefix("ok "), result.output)
        // The tail through ordinary tools: the last three bytes.
        let tail = try check("tail", ["-c", "3", mounted.path("huge")])
        let last = Self.marks.suffix(3).map { mark -> UInt8 in
            let i = Self.marks.firstIndex(of: mark) ?? 0
            return UInt8((i * 37 + 1) % 256)
        }
        XCTAssertEqual(tail.stdout, last)
        XCTAssertEqual(try check("cat", [mounted.path("tiny")]).output, "tiny\n")
        report("checked \(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) reads in \(String(format: "%.2f", seconds(since: start))) s")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("error") }, [])
    }
}
