import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A lock wipes the plaintext a mount keeps of fragment units: the units
/// opened into the reader's unit cache, shared by its workers, and the
/// zstd frames opened in place in the fetch buffers that cache lends.
final class FragmentLockTests: LockTestCase {
    /// Two small files packed into one fragment unit; reading the second
    /// with `O_DIRECT` (so the reply buffer never holds the first) opens
    /// the whole unit, the first file's marker with it. The first file is
    /// a random block written twice: zstd stores the block's bytes as they
    /// are in the frame, so the marker is also in the opened frame. It is
    /// in the daemon's memory (the control) and gone after the lock.
    func testLock_FragmentUnitsAndFramesWiped() throws {
        try requireRoot()
        try scratch.makeDirectory("fsrc")
        var generator = SeededGenerator(seed: 1515)
        let block = generator.bytes(2_000)
        let marker = Array(block[100..<148])
        try scratch.write("fsrc/a.bin", block + block)
        var notes: [UInt8] = []
        while notes.count < 3_000 { notes += Array("{\"note\": \(notes.count % 977), \"text\": \"lorem ipsum\"},\n".utf8) }
        try scratch.write("fsrc/b.bin", notes)
        let bundle = scratch.url("f.encfs")
        try packOrThrow(scratch.url("fsrc"), bundle, keyFile: key, ["--compress", "zstd", "--chunk-size", "64K"])
        XCTAssertEqual(try info(bundle, ["--key-file", key])["fragment_files"] as? Int, 2, "both files in one fragment")
        // verify opens the frames in place too.
        let verify = try check(try Tools.inspect(), ["verify", bundle, "--key-file", key]).output
        XCTAssertTrue(verify.contains(": intact"), verify)

        let mounted = try mount(bundle, keyFile: key, options: ["--protection", "complete", "--threads", "1"])
        defer { unmount(mounted) }
        guard let pid = mounted.daemonPID else { throw SubprocessError("no daemon") }
        let read = try python("""
            import mmap, os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
            buf = mmap.mmap(-1, 4096)
            print(os.preadv(fd, [buf], 0), buf[:1].decode())
            """, [mounted.path("b.bin")])
        XCTAssertEqual(read.output, "\(notes.count) {\n", read.summary)
        XCTAssertTrue(try memory(of: pid, contains: marker), "the search does not find the opened unit while unlocked")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertFalse(try memory(of: pid, contains: marker), "a fragment unit's plaintext is left in the daemon's memory after lock")
    }
}
