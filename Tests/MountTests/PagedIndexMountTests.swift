import Foundation
import SharedTestSupport
import XCTest

/// The paged index (format version 2) through the real executables: a
/// bundle of several index pages mounts and serves every entry, and a
/// damaged page surfaces where it is first used, as EIO on the mount and
/// as one clear error line from `encfs-inspect`, while the rest of the
/// tree keeps working.
final class PagedIndexMountTests: ToolTestCase {
    /// Three directories of 1,500 files with long names (several 64 KiB
    /// record pages), every file's contents its own name, plus one
    /// duplicate pair (shared bodies: version 2, so the index is paged).
    private func makeBundle() throws -> (bundle: String, key: String) {
        let source = try scratch.makeDirectory("src")
        for d in 0..<3 {
            try scratch.makeDirectory("src/d\(d)")
            for i in 0..<1500 {
                let name = "d\(d)/entry-\(String(100_000 + i).dropFirst())-with-a-name-long-enough-to-fill-pages"
                try scratch.write("src/\(name)", Array(name.utf8))
            }
        }
        try scratch.write("src/same-1", Array("same\n".utf8))
        try scratch.write("src/same-2", Array("same\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("paged.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        return (bundle, key)
    }

    func testMount_PagedIndex_ServesEveryEntry() throws {
        let (bundle, key) = try makeBundle()
        let info = try check(try Tools.inspect(), ["info", bundle, "--key-file", key]).output
        XCTAssertTrue(info.contains("format version: 2\n"), info)
        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        let count = try check("find", [mounted.path(""), "-type", "f"]).output.split(separator: "\n").count
        XCTAssertEqual(count, 3 * 1500 + 2)
        let name = "d2/entry-01499-with-a-name-long-enough-to-fill-pages"
        XCTAssertEqual(try check("cat", [mounted.path(name)]).output, name)
        XCTAssertEqual(try check("stat", ["-c", "%h", mounted.path("")]).output, "5\n", "root nlink: 2 + three subdirectories")
        XCTAssertEqual(try check(try Tools.inspect(), ["verify", bundle, "--key-file", key]).status, 0)
    }

    /// The last bytes of the bundle are the tag of the last record page
    /// (no compression: no table pages), which holds the last files of d2.
    func testMount_DamagedIndexPage_EIOWhereUsedAndTheRestServes() throws {
        let (bundle, key) = try makeBundle()
        let size = try BundleSurgery.size(of: bundle)
        try BundleSurgery.flipByte(at: size - 1, in: bundle)
        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        let list = try run("ls", [mounted.path("d2")])
        XCTAssertNotEqual(list.status, 0, list.summary)
        XCTAssertTrue(list.errorOutput.contains("Input/output error"), list.errorOutput)
        let last = try run("stat", [mounted.path("d2/entry-01499-with-a-name-long-enough-to-fill-pages")])
        XCTAssertTrue(last.errorOutput.contains("Input/output error"), last.errorOutput)
        // The rest of the tree, before and after the failures.
        let name = "d0/entry-00007-with-a-name-long-enough-to-fill-pages"
        XCTAssertEqual(try check("cat", [mounted.path(name)]).output, name)
        XCTAssertEqual(try check("ls", [mounted.path("d0")]).output.split(separator: "\n").count, 1500)
        XCTAssertTrue(mounted.logLines().contains { $0.contains("corrupted index") && $0.contains("failed authentication") },
                      mounted.logLines().joined(separator: "\n"))

        // encfs-inspect: opening works (page 0), verify and listing d2 fail with one line.
        for arguments in [["verify", bundle, "--key-file", key], ["ls", bundle, "d2", "--key-file", key]] {
            let result = try run(try Tools.inspect(), arguments)
            XCTAssertNotEqual(result.status, 0, result.summary)
            let first = result.errorOutput.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertTrue(first.hasPrefix("encfs-inspect: error: corrupted index: index page ") && first.contains(" failed authentication ("),
                          result.errorOutput)
        }
    }
}
