import Foundation
import SharedTestSupport
import XCTest

/// `--readahead`: the daemon sets the mount's kernel read-ahead (root only),
/// 1024 KiB by default, before it serves — and mounting must not wait on
/// itself while doing so (it reads the device number from mountinfo).
final class ReadaheadTests: ToolTestCase {
    private func readahead(of mounted: MountedBundle) throws -> Int {
        let device = try check("mountpoint", ["-d", mounted.mountpoint]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        let text = try String(contentsOfFile: "/sys/class/bdi/\(device)/read_ahead_kb", encoding: .utf8)
        return try XCTUnwrap(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    private func packSmall() throws -> (bundle: String, key: String) {
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/a", Array("alpha\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("r.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        return (bundle, key)
    }

    func testDefault_AsRootIs1MiB() throws {
        try XCTSkipUnless(getuid() == 0, "the default applies only to root") // CI and these machines run as root
        let (bundle, key) = try packSmall()
        let mounted = try mount(bundle, keyFile: key)
        XCTAssertEqual(try readahead(of: mounted), 1024)
    }

    func testOption_SetsTheValueInBackgroundAndForeground() throws {
        let (bundle, key) = try packSmall()
        let background = try mount(bundle, keyFile: key, options: ["--readahead", "256"])
        XCTAssertEqual(try readahead(of: background), 256)
        let spaced = try scratch.makeDirectory("mount point with spaces")
        let foreground = try mount(bundle, keyFile: key, at: spaced, options: ["--readahead", "512"], foreground: true)
        XCTAssertEqual(try readahead(of: foreground), 512)
        let cat = try check("cat", [foreground.path("a")])
        XCTAssertEqual(cat.output, "alpha\n")
    }

    func testOption_OutOfRangeIsAUsageError() throws {
        let (bundle, key) = try packSmall()
        let target = try scratch.makeDirectory("mnt")
        for bad in ["-1", "16385", "lots"] {
            let result = try run(try Tools.mount(), [bundle, target, "--key-file", key, "--readahead", bad])
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertTrue(result.errorOutput.contains("--readahead"), result.errorOutput)
        }
    }
}
