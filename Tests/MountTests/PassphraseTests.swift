import Foundation
import SharedTestSupport
import XCTest

/// Passphrase slots: pack with `--passphrase-file` (scrypt cost 2^14 to keep
/// the test fast), mount with the file or with `ENCFS_PASSPHRASE`; a wrong
/// passphrase is refused with exit 1.
final class PassphraseTests: ToolTestCase {
    static let passphrase = "correct horse battery staple ✓"
    private var source = ""
    private var passphraseFile = ""
    private var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/hello", Array("hello\n".utf8))
        try scratch.write("src/chunks", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 / 3) })
        // One trailing newline in the file is not part of the passphrase.
        passphraseFile = try scratch.write("passphrase", Array("\(Self.passphrase)\n".utf8), mode: 0o600)
        bundle = scratch.url("p.encfs")
        let result = try pack(source, bundle, ["--passphrase-file", passphraseFile, "--scrypt-log-n", "14", "-q"])
        assertSuccess(result)
    }

    private func assertSameTree(_ mounted: MountedBundle, file: StaticString = #filePath, line: UInt = #line) throws {
        let diff = try run("diff", ["-r", source, mounted.mountpoint])
        XCTAssertEqual(diff.status, 0, diff.output, file: file, line: line)
    }

    func testMount_WithPassphraseFile() throws {
        let mounted = try mount(bundle, keyArguments: ["--passphrase-file", passphraseFile])
        try assertSameTree(mounted)
    }

    func testMount_WithPassphraseEnvironment() throws {
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_PASSPHRASE": Self.passphrase])
        try assertSameTree(mounted)
        let pid = try XCTUnwrap(mounted.daemonPID)
        let environ = try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        XCTAssertNil(environ.range(of: Data("horse battery".utf8)), "passphrase in the daemon's environment")
    }

    func testMount_WithPassphraseEnvironmentInForeground() throws {
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_PASSPHRASE": Self.passphrase],
                                foreground: true)
        try assertSameTree(mounted)
        let pid = try XCTUnwrap(mounted.daemonPID)
        let environ = try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/environ"))
        XCTAssertNil(environ.range(of: Data("horse battery".utf8)), "passphrase in /proc/\(pid)/environ")
    }

    func testMount_WrongPassphraseFails() throws {
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let wrongFile = try scratch.write("wrong", Array("\(Self.passphrase)!\n".utf8))
        let cases: [(arguments: [String], environment: [String: String?])] = [
            (["--passphrase-file", wrongFile], [:]),
            ([], ["ENCFS_PASSPHRASE": "\(Self.passphrase)\n"]),  // the newline counts in the environment
            ([], ["ENCFS_PASSPHRASE": String(Self.passphrase.dropLast())]),
            (["--key-file", try makeKeyFile()], [:]),
        ]
        for (arguments, environment) in cases {
            let result = try run(try Tools.mount(), [bundle, mnt] + arguments, environment: environment)
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains("wrong key"), result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains("passphrase"), "should name the slot kind: \(result.errorOutput)")
            XCTAssertFalse(MountTable.isMounted(mnt))
        }
    }

    func testMount_EmptyPassphraseRefused() throws {
        let mnt = try scratch.makeDirectory("mnt")
        let empty = try scratch.write("empty", Array("\n".utf8))
        let fromFile = try run(try Tools.mount(), [bundle, mnt, "--passphrase-file", empty])
        XCTAssertEqual(fromFile.status, 1, fromFile.summary)
        XCTAssertTrue(fromFile.errorOutput.contains("empty"), fromFile.errorOutput)
        let fromEnvironment = try run(try Tools.mount(), [bundle, mnt], environment: ["ENCFS_PASSPHRASE": ""])
        XCTAssertEqual(fromEnvironment.status, 1, fromEnvironment.summary)
        XCTAssertTrue(fromEnvironment.errorOutput.contains("empty"), fromEnvironment.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mnt))
    }

    /// Nine passphrase slots at the highest cost encfs-pack offers would need
    /// more scrypt work per passphrase than a reader spends: refused at
    /// once (no scrypt run), nothing written.
    func testPack_PassphraseSlotsOverTotalWork_Refused() throws {
        let files = try (0..<9).map { try scratch.write("pass-\($0)", Array("passphrase \($0)\n".utf8), mode: 0o600) }
        let bundle = scratch.url("heavy.encfs")
        let result = try pack(source, bundle, files.flatMap { ["--passphrase-file", $0] } + ["--scrypt-log-n", "20", "-q"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertTrue(result.errorOutput.contains("9 passphrase slots need scrypt work 75497472"), result.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: bundle))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.contains("heavy") }, [])
    }

    func testPack_KeyAndPassphraseSlotsEachOpen() throws {
        let key = try makeKeyFile()
        let both = scratch.url("both.encfs")
        assertSuccess(try pack(source, both, ["--key-file", key, "--passphrase-file", passphraseFile,
                                              "--scrypt-log-n", "14", "-q"]))
        let viaKey = try mount(both, keyFile: key)
        try assertSameTree(viaKey)
        let viaPassphrase = try mount(both, keyArguments: [], environment: ["ENCFS_PASSPHRASE": Self.passphrase])
        try assertSameTree(viaPassphrase)
        // A wrong key next to the right passphrase still opens (any slot will do).
        let wrong = try makeKeyFile("wrong")
        let mixed = try mount(both, keyArguments: ["--key-file", wrong, "--passphrase-file", passphraseFile])
        try assertSameTree(mixed)
    }
}
