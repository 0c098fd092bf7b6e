import Foundation
import SharedTestSupport
import XCTest

/// Readers do not check that file ids are unique (security review, finding
/// 8); `encfs-inspect verify` does: two files with one id share a file key
/// and chunk nonces, so the index is not what encfs-pack wrote. The crafted
/// bundle authenticates everywhere (`BundleSurgery.shareFileID`), so before
/// this check verify called it intact. The two files have the same size and
/// other contents: identical files share one body and one id by design
/// (deduplication, CompressionMountTests), which verify accepts.
final class FileIDVerifyTests: ToolTestCase {
    func testVerify_TwoFilesShareAFileID_ReportedAsDamage() throws {
        let source = try scratch.makeDirectory("src")
        let contents = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try scratch.write("src/one.bin", contents)
        try scratch.write("src/two.bin", contents.map { $0 ^ 0x5A })
        try scratch.write("src/other.txt", Array("other\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "4K"])
        let inspect = try Tools.inspect()
        let intact = try run(inspect, ["verify", bundle, "--key-file", key])
        XCTAssertEqual(intact.status, 0, intact.summary)
        XCTAssertEqual(intact.output, "verified 3 files, 7 chunks: intact\n")

        try BundleSurgery.shareFileID(of: "one.bin", with: "two.bin", in: bundle, keyFile: key)
        // Still reads back (two.bin now holds a copy of one.bin's body at
        // its own place): nothing but the repeated id is wrong.
        let cat = try run(inspect, ["cat", bundle, "two.bin", "--key-file", key])
        XCTAssertTrue(cat.status == 0 && cat.stdout == contents, cat.summary)
        let verify = try run(inspect, ["verify", bundle, "--key-file", key])
        XCTAssertEqual(verify.status, 1, verify.summary)
        XCTAssertEqual(verify.output, "damaged: two.bin (shares its file id with one.bin)\n"
                       + "verified 3 files, 7 chunks: 1 files share a file id\n")
    }
}
