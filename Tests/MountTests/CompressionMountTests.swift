import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Format version 2 through the real executables: `encfs-pack --compress`,
/// a mount that serves compressed and deduplicated files (sequential and
/// random reads, `du` per path), `encfs-inspect info`, `ls -l` and
/// `verify`, and the pack command's refusals.
final class CompressionMountTests: ToolTestCase {
    /// Text that compresses well: `n` bytes of JSON-ish lines.
    private func text(_ n: Int, seed: Int) -> [UInt8] {
        var out: [UInt8] = []
        var i = seed
        while out.count < n {
            out += Array("{\"id\": \(i % 997), \"name\": \"item \(i % 13)\", \"tags\": [\"a\", \"b\"]},\n".utf8)
            i += 1
        }
        return Array(out[0..<n])
    }

    private func makeSource() throws -> (source: String, files: [String: [UInt8]]) {
        let source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/lib")
        try scratch.makeDirectory("src/copy")
        var generator = SeededGenerator(seed: 14)
        let files: [String: [UInt8]] = [
            "data.json": text(700_000, seed: 1),
            "lib/app.js": text(200_000, seed: 2),
            "copy/app.js": text(200_000, seed: 2), // a duplicate of lib/app.js
            "photo.jpg": generator.bytes(150_000), // does not compress
            "tiny.txt": Array("tiny\n".utf8),
        ]
        for (name, data) in files { try scratch.write("src/\(name)", data) }
        return (source, files)
    }

    func testMount_ZstdBundle_ServesEveryFileAndDuCountsEachPath() throws {
        let (source, files) = try makeSource()
        let key = try makeKeyFile()
        let bundle = scratch.url("z.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd:5"])
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: bundle)[.size] as? Int)
        let plain = files.values.reduce(0) { $0 + $1.count }
        XCTAssertLessThan(size, plain / 3, "compressed and deduplicated bundle")

        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        for (name, data) in files {
            XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: mounted.path(name))) == Data(data), name)
        }
        // 4 KiB reads at odd offsets, through dd (O_DIRECT-free, page cache
        // cold for these offsets on a fresh mount).
        let data = try XCTUnwrap(files["data.json"])
        for offset in [0, 4095, 65_535, 65_536, 300_001, data.count - 4096] {
            let result = try check("dd", ["if=\(mounted.path("data.json"))", "bs=1", "skip=\(offset)", "count=4096", "status=none"])
            XCTAssertTrue(result.stdout == Array(data[offset..<(offset + 4096)]), "4 KiB at \(offset)")
        }
        // Each path reports its own size; du counts both copies.
        let du = try check("du", ["-b", "--apparent-size", mounted.path("lib/app.js"), mounted.path("copy/app.js")]).output
        XCTAssertEqual(du.split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" }, ["200000", "200000"])
        let blocks = try check("du", ["-k", mounted.path("lib/app.js"), mounted.path("copy/app.js")]).output
        XCTAssertEqual(blocks.split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" }, ["196", "196"])
    }

    func testInspect_ZstdBundle_InfoLsAndVerify() throws {
        let (source, _) = try makeSource()
        let key = try makeKeyFile()
        let bundle = scratch.url("z.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd"])
        let info = try check(try Tools.inspect(), ["info", bundle, "--key-file", key]).output
        XCTAssertTrue(info.contains("format version: 2\n"), info)
        XCTAssertTrue(info.contains("compression:    zstd level 9\n"), info)
        XCTAssertTrue(info.contains("chunk size:     65536 (64.0 KiB)\n"), info)
        XCTAssertTrue(info.contains("deduplicated:   200000 (195.3 KiB) stored once for several files\n"), info)
        let json = try check(try Tools.inspect(), ["info", "--json", bundle, "--key-file", key]).output
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(fields["format_version"] as? Int, 2)
        XCTAssertEqual(fields["compression"] as? String, "zstd")
        XCTAssertEqual(fields["deduplicated_bytes"] as? Int, 200_000)
        let stored = try XCTUnwrap(fields["stored_bytes"] as? Int)
        XCTAssertLessThan(stored, try XCTUnwrap(fields["plaintext_bytes"] as? Int) / 3)
        // ls -l: size, then the stored size; the photo is stored raw: 3
        // chunks of 64 KiB (the default with --compress), a tag each.
        let ls = try check(try Tools.inspect(), ["ls", "-l", bundle, "--key-file", key]).output
        let photo = try XCTUnwrap(ls.split(separator: "\n").first { $0.hasSuffix(" photo.jpg") }).split(separator: " ")
        XCTAssertEqual(Array(photo[1...2]), ["150000", "150048"], String(ls))
        let verify = try check(try Tools.inspect(), ["verify", bundle, "--key-file", key]).output
        XCTAssertTrue(verify.hasSuffix(": intact\n"), verify)
    }

    /// Without --compress, and without duplicates, the bundle is version 1.
    func testPack_Default_IsVersion1() throws {
        let source = try scratch.makeDirectory("plain")
        try scratch.write("plain/a", Array("a\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("p.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let info = try check(try Tools.inspect(), ["info", bundle, "--key-file", key]).output
        XCTAssertTrue(info.contains("format version: 1\n") && info.contains("compression:    none\n"), info)
    }

    func testPack_BadCompressArguments_UsageError() throws {
        let source = try scratch.makeDirectory("plain")
        let key = try makeKeyFile()
        for (argument, message) in [("zstd:0", "invalid zstd level in --compress zstd:0 (use 1 … 19)"),
                                    ("zstd:20", "invalid zstd level in --compress zstd:20 (use 1 … 19)"),
                                    ("gzip", "unknown compression gzip (use none or zstd[:LEVEL])")] {
            let result = try pack(source, scratch.url("x.encfs"), ["--key-file", key, "--compress", argument])
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertEqual(result.stderr.split(separator: UInt8(ascii: "\n")).first.map { String(decoding: $0, as: UTF8.self) },
                           "encfs-pack: error: \(message)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.url("x.encfs")))
        }
    }
}
