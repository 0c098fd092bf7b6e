import Foundation
import XCTest
import SharedTestSupport

/// Fragments in units larger than a chunk (`encfs-pack --fragment-unit`),
/// through the real executables: a mount of many small files read whole
/// by `diff -r` against the source (on the transport ENCFS_TEST_TRANSPORT
/// names) and by four readers at once, what `encfs-inspect info` says of
/// the unit, `verify`, and the option's refusals.
final class FragmentUnitMountTests: ToolTestCase {
    /// Small files of several kinds below the 2 KiB threshold of 4 KiB
    /// chunks (about 150 KB: several 32 KiB units), a few larger files,
    /// empty files and a duplicate.
    private func makeSource() throws -> String {
        let source = try scratch.makeDirectory("src")
        var generator = SeededGenerator(seed: 3131)
        let words = ["static ", "int ", "return ", "struct ", "#include <x.h>\n", "/* note */ ", "{\n", "}\n", "0x1f, "]
        func text(_ n: Int) -> [UInt8] {
            var out: [UInt8] = []
            while out.count < n { out += Array(words[Int(generator.next() % UInt64(words.count))].utf8) }
            return Array(out[0..<n])
        }
        for dir in ["include", "src", "doc"] { try scratch.makeDirectory("src/\(dir)") }
        for i in 0..<150 {
            let dir = ["include", "src", "doc"][i % 3]
            let ext = ["h", "c", "txt"][i % 3]
            let size = 1 + Int(generator.next() % 2047)
            try scratch.write("src/\(dir)/f\(i).\(ext)", i % 9 == 0 ? generator.bytes(size) : text(size))
        }
        try scratch.write("src/big.c", text(5 * 4096 + 17))
        try scratch.write("src/empty.h", [])
        try scratch.write("src/doc/copy.c", Array(try Data(contentsOf: URL(fileURLWithPath: scratch.url("src/src/f1.c")))))
        return source
    }

    func testMount_FragmentUnits_DiffIdenticalAndInspectShowsTheUnit() throws {
        let source = try makeSource()
        let key = try makeKeyFile()
        let bundle = scratch.url("u.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd", "--chunk-size", "4K", "--fragment-unit", "32K"])

        let info = try check(try Tools.inspect(), ["info", bundle]).output
        XCTAssertTrue(info.contains("fragment unit:  32768 (32.0 KiB)\n"), info)
        let json = try check(try Tools.inspect(), ["info", "--json", bundle, "--key-file", key]).output
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(fields["fragment_unit"] as? Int, 32768)
        XCTAssertGreaterThan(try XCTUnwrap(fields["fragments"] as? Int), 2, "about 150 KB of small files in 32 KiB units")
        let verify = try check(try Tools.inspect(), ["verify", bundle, "--key-file", key]).output
        XCTAssertTrue(verify.contains(": intact"), verify)

        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        _ = try check("diff", ["-r", source, mounted.mountpoint])
        // Four readers at once over every file: slices of shared units from
        // several workers' caches.
        let script = "find \(mounted.mountpoint) -type f | sort > \(scratch.url("list"));"
            + " for i in 1 2 3 4; do xargs -a \(scratch.url("list")) cat > \(scratch.url("out"))$i & done; wait;"
            + " find \(source) -type f | sort | xargs cat > \(scratch.url("expected"))"
        _ = try check("/bin/sh", ["-c", script])
        let expected = try Data(contentsOf: URL(fileURLWithPath: scratch.url("expected")))
        for i in 1...4 {
            XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: scratch.url("out\(i)"))) == expected, "reader \(i)")
        }
    }

    /// A unit that is no power of two or outside 4K … 1M: a usage error,
    /// one line, nothing written.
    func testPack_BadFragmentUnit_UsageError() throws {
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/a.c", Array("int a;\n".utf8))
        let key = try makeKeyFile()
        for (unit, says) in [("3K", "not a power of two"), ("2M", "invalid fragment unit"), ("2K", "outside 4K … 1M")] {
            let bundle = scratch.url("bad.encfs")
            let result = try run(try Tools.pack(), [source, bundle, "--key-file", key, "--compress", "zstd", "--fragment-unit", unit])
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertEqual(result.errorLines.filter { !$0.hasPrefix("hint: ") && !$0.hasPrefix("usage: ") }.count, 1,
                           result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains("encfs-pack: error: "), result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains(says), "\(unit): \(result.errorOutput)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: bundle), unit)
        }
    }
}
