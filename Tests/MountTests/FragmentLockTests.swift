import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A lock wipes the plaintext a mount keeps of fragment units: the units
/// opened into the reader's unit cache, shared by its workers, which a
/// lock drops with the reader (the fetch buffers the cache lends, where
/// zstd frames are opened in place, go with it).
final class FragmentLockTests: LockTestCase {
    /// Two small files packed into one fragment unit; reading the second
    /// with `O_DIRECT` (so the reply buffer never holds the first) opens
    /// the whole unit into the cache, the first file's marker with it. The
    /// marker is in the daemon's memory (the control) and gone after the
    /// lock.
    func testLock_FragmentUnitsWiped() throws {
        try requireRoot()
        try scratch.makeDirectory("fsrc")
        var generator = SeededGenerator(seed: 1515)
        let marker = generator.bytes(48)
        var notes: [UInt8] = []
        while notes.count < 3_000 { notes += Array("{\"note\": \(notes.count % 977), \"text\": \"lorem ipsum\"},\n".utf8) }
        var first = notes
        first.replaceSubrange(1_500..<(1_500 + marker.count), with: marker)
        try scratch.write("fsrc/a.json", first)
        try scratch.write("fsrc/b.json", notes)
        let bundle = scratch.url("f.encfs")
        try packOrThrow(scratch.url("fsrc"), bundle, keyFile: key, ["--compress", "zstd", "--chunk-size", "64K"])
        let json = try check(try Tools.inspect(), ["info", "--json", bundle, "--key-file", key]).output
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(fields["fragment_files"] as? Int, 2, "both files in fragments: \(json)")
        XCTAssertEqual(fields["fragments"] as? Int, 1, "in one fragment: \(json)")
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
            """, [mounted.path("b.json")])
        XCTAssertEqual(read.output, "\(notes.count) {\n", read.summary)
        XCTAssertTrue(try memory(of: pid, contains: marker), "the search does not find the opened unit while unlocked")

        assertSuccess(try ctl(mounted, ["lock"]))
        XCTAssertFalse(try memory(of: pid, contains: marker), "a fragment unit's plaintext is left in the daemon's memory after lock")
    }
}
