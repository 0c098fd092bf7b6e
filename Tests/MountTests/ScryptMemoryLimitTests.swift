import Foundation
import SharedTestSupport
import XCTest

/// scrypt runs before anything in the header is authenticated (security
/// review, finding 6), so a hostile bundle could make every open with a
/// passphrase take up to 2 GiB. Readers now stop at 1 GiB by default,
/// `--scrypt-max-memory SIZE` raises or lowers that, and a slot over the
/// limit is refused before any scrypt run with an error and a hint naming
/// the option. The test bundle's slot needs 16 MiB (N = 2^14, r = 8), so a
/// low limit stands in for a huge slot.
final class ScryptMemoryLimitTests: ToolTestCase {
    private var passphraseFile = ""
    private var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/hello", Array("hello\n".utf8))
        passphraseFile = try scratch.write("passphrase", Array("a passphrase for the memory limit\n".utf8), mode: 0o600)
        bundle = scratch.url("p.encfs")
        assertSuccess(try pack(source, bundle, ["--passphrase-file", passphraseFile, "--scrypt-log-n", "14", "-q"]))
    }

    private let refusal = "error: key slot 1 (passphrase) needs 16 MiB of scrypt memory, more than the 8 MiB allowed"
    private let hint = "hint: if you trust this bundle, allow more with --scrypt-max-memory SIZE (this slot needs 16M)"

    func testMount_SlotOverLimit_RefusedNamingTheOption() throws {
        for extra in [[], ["-f"]] {
            let mountpoint = try scratch.makeDirectory(uniqueName("mnt"))
            addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
            let result = try run(try Tools.mount(), [bundle, mountpoint, "--passphrase-file", passphraseFile,
                                                     "--scrypt-max-memory", "8M"] + extra, timeout: 60)
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines, ["encfs-mount: \(refusal) (\(bundle))", hint], "\(extra)")
            XCTAssertFalse(MountTable.isMounted(mountpoint))
        }
    }

    func testMount_LimitAtTheSlotsNeed_Mounts() throws {
        let mounted = try mount(bundle, keyArguments: ["--passphrase-file", passphraseFile], options: ["--scrypt-max-memory", "16M"])
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("hello")), Data("hello\n".utf8))
    }

    func testInspect_SlotOverLimit_RefusedNamingTheOption() throws {
        for command in [["info"], ["ls"], ["verify"]] {
            let result = try run(try Tools.inspect(), command + [bundle, "--passphrase-file", passphraseFile,
                                                                  "--scrypt-max-memory", "8m"])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines, ["encfs-inspect: \(refusal) (\(bundle))", hint], "\(command)")
        }
        let allowed = try run(try Tools.inspect(), ["ls", bundle, "--passphrase-file", passphraseFile, "--scrypt-max-memory", "16777216"])
        XCTAssertEqual(allowed.status, 0, allowed.summary)
        XCTAssertEqual(allowed.output, "hello\n")
    }

    func testScryptMaxMemory_BadValues_UsageError() throws {
        try assertMountOptionRejected("--scrypt-max-memory", values: ["0", "abc", "3G", "512K", "-1M", "1.5G", ""],
                                      message: "--scrypt-max-memory must be a size from 1M to 2G")
        let result = try run(try Tools.inspect(), ["ls", bundle, "--scrypt-max-memory", "4G"])
        XCTAssertEqual(result.status, 2, result.summary)
    }
}
