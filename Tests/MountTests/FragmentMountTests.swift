import Foundation
import XCTest
import SharedTestSupport

/// Small files packed into fragments, through the real executables: a
/// mount of a tree of many small files of several kinds, read whole by
/// `diff -r` against the source (on the transport ENCFS_TEST_TRANSPORT
/// names), concurrent readers of one fragment, and what `encfs-inspect
/// info`, `ls -l --json` and `verify` say of the fragments.
final class FragmentMountTests: ToolTestCase {
    /// A source tree like a small source package: headers, sources and
    /// text around and below the fragment threshold, a few larger files,
    /// empty files and duplicates in other directories.
    private func makeSource(threshold: Int) throws -> String {
        let source = try scratch.makeDirectory("src")
        var generator = SeededGenerator(seed: 31)
        let words = ["static ", "int ", "return ", "struct ", "#include <x.h>\n", "/* note */ ", "{\n", "}\n", "0x1f, "]
        func text(_ n: Int) -> [UInt8] {
            var out: [UInt8] = []
            while out.count < n { out += Array(words[Int(generator.next() % UInt64(words.count))].utf8) }
            return Array(out[0..<n])
        }
        for dir in ["include", "include/sub", "src", "doc", "copy"] { try scratch.makeDirectory("src/\(dir)") }
        for i in 0..<120 {
            let dir = ["include", "include/sub", "src", "doc"][i % 4]
            let ext = ["h", "c", "txt", "S"][i % 4]
            // Every fifth file at or around the threshold, the rest below it.
            let size = i % 5 == 0 ? [1, threshold - 1, threshold, threshold + 1][i / 5 % 4]
                : 1 + Int(generator.next() % UInt64(threshold - 1))
            try scratch.write("src/\(dir)/f\(i).\(ext)", i % 7 == 0 ? generator.bytes(size) : text(size))
        }
        try scratch.write("src/big.c", text(5 * threshold + 17))
        try scratch.write("src/empty.h", [])
        try scratch.write("src/include/empty.c", [])
        // Duplicates of slices, elsewhere in the tree.
        for (copy, original) in [("copy/f1.h", "include/sub/f1.c"), ("copy/f2.txt", "src/f2.txt")] {
            try scratch.write("src/\(copy)", Array(try Data(contentsOf: URL(fileURLWithPath: scratch.url("src/\(original)")))))
        }
        return source
    }

    func testMount_FragmentBundle_DiffIdenticalAndInspectCountsThem() throws {
        // 16 KiB chunks: files below 4 KiB go into fragments.
        let source = try makeSource(threshold: 4096)
        let key = try makeKeyFile()
        let bundle = scratch.url("f.encfs")
        // Units of one chunk, as before fragment units (FragmentUnitMountTests has larger ones).
        try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd", "--chunk-size", "16K", "--fragment-unit", "16K"])

        let info = try check(try Tools.inspect(), ["info", bundle, "--key-file", key]).output
        let line = try XCTUnwrap(info.split(separator: "\n").first { $0.hasPrefix("fragments:") }, info)
        let json = try check(try Tools.inspect(), ["info", "--json", bundle, "--key-file", key]).output
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let fragmentFiles = try XCTUnwrap(fields["fragment_files"] as? Int)
        let fragments = try XCTUnwrap(fields["fragments"] as? Int)
        XCTAssertGreaterThan(fragments, 1)
        XCTAssertGreaterThan(fragmentFiles, 60)
        XCTAssertEqual(String(line), "fragments:      \(fragments), holding \(fragmentFiles) small files")
        let listing = try check(try Tools.inspect(), ["ls", "--json", bundle, "include/sub", "--key-file", key]).output
        XCTAssertTrue(listing.contains("\"in_fragment\": true"), listing)
        let verify = try check(try Tools.inspect(), ["verify", bundle, "--key-file", key]).output
        XCTAssertTrue(verify.contains(": intact"), verify)

        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        _ = try check("diff", ["-r", source, mounted.mountpoint])
        // Four readers at once over every file, twice: slices of shared
        // fragments from several workers' caches.
        let script = "find \(mounted.mountpoint) -type f | sort > \(scratch.url("list"));"
            + " for i in 1 2 3 4; do xargs -a \(scratch.url("list")) cat > \(scratch.url("out"))$i & done; wait;"
            + " find \(source) -type f | sort | xargs cat > \(scratch.url("expected"))"
        _ = try check("/bin/sh", ["-c", script])
        let expected = try Data(contentsOf: URL(fileURLWithPath: scratch.url("expected")))
        for i in 1...4 {
            XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: scratch.url("out\(i)"))) == expected, "reader \(i)")
        }
    }
}
