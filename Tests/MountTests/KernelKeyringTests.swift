import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `--key-keyring DESCRIPTION` (and `--keyring-passphrase`) against the
/// real kernel keyring: keys put there with `keyctl`, read by encfs-mount
/// (before it starts the daemon) and encfs-inspect, and every way a key
/// can be unusable — missing, expired, revoked, of another type, of the
/// wrong length or not hex — refused with one line naming the description,
/// exit 1, nothing mounted. No payload appears in any stderr (checked by
/// ``KeyTestCase`` for every command run here).
final class KernelKeyringTests: KeyTestCase {
    private var keyFile = ""
    private var bundle = ""
    private let contents = Array("served with a key from the kernel keyring\n".utf8)

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard access("/usr/bin/keyctl", X_OK) == 0 || access("/bin/keyctl", X_OK) == 0 else {
            throw SubprocessError("keyctl is missing: run Scripts/install-deps.sh (Debian keyutils)")
        }
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/notes.txt", contents)
        try scratch.write("src/data.bin", (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
        keyFile = try makeRawKey()
        bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: keyFile)
    }

    /// The key file's bytes, as `keyctl padd user DESC @u < key` stores them
    /// (64 hex characters and a newline).
    private func keyFileBytes() throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: keyFile) else { throw SubprocessError("cannot read \(keyFile)") }
        return Array(data)
    }

    // MARK: - Reading the key

    func testMount_KeyFromUserKeyringServesTheBundle() throws {
        let description = uniqueKeyDescription("mount")
        try addKeyringKey(description, payload: try keyFileBytes())
        let mounted = try mount(bundle, keyArguments: ["--key-keyring", description])
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("notes.txt")).map(Array.init), contents)
        try assertSameTree(scratch.url("src"), mounted.mountpoint)
        unmount(mounted)
    }

    func testInspect_KeyFromUserKeyringOpensEveryCommand() throws {
        let description = uniqueKeyDescription("inspect")
        try addKeyringKey(description, payload: try keyFileBytes())
        let cat = try inspect(["cat", bundle, "notes.txt", "--key-keyring", description])
        assertSuccess(cat)
        XCTAssertEqual(cat.stdout, contents)
        assertSuccess(try inspect(["verify", bundle, "--key-keyring", description]))
        XCTAssertEqual(try info(bundle, ["--key-keyring", description])["verified"] as? Bool, true)
    }

    /// encfs-pack makes a raw-key slot from the keyring key (the key file
    /// opens the result), and rekey opens the bundle with it.
    func testPackAndRekey_KeyFromKeyring() throws {
        let description = uniqueKeyDescription("pack")
        try addKeyringKey(description, payload: try keyFileBytes())
        let packed = scratch.url("packed.encfs")
        assertSuccess(try pack(scratch.url("src"), packed, ["--key-keyring", description, "--quiet"]))
        let cat = try inspect(["cat", packed, "notes.txt", "--key-file", keyFile])
        assertSuccess(cat)
        XCTAssertEqual(cat.stdout, contents)
        let added = try makeRawKey("added.key")
        assertSuccess(try inspect(["rekey", packed, "--key-keyring", description, "--add-key-file", added]))
        XCTAssertEqual(try slots(packed).count, 2)
        assertSuccess(try inspect(["verify", packed, "--key-file", added]))
    }

    func testHelp_EveryKeyTakingToolListsTheOptions() throws {
        for tool in [try Tools.mount(), try Tools.inspect(), try Tools.pack()] {
            let help = try check(tool, ["--help"]).output
            for option in ["--key-keyring DESC", "--keyring-passphrase", "--key-credential NAME", "--passphrase-credential NAME"] {
                XCTAssertTrue(help.contains(option), "\(tool) --help lacks \(option)")
            }
        }
    }

    /// A key only in a session keyring (an anonymous one that `keyctl
    /// session -` makes for one command and that goes with it) is found:
    /// the session keyring is searched first.
    func testInspect_KeyOnlyInSessionKeyring() throws {
        let description = uniqueKeyDescription("session")
        let payload = try scratch.write("session-payload", try keyFileBytes(), mode: 0o600)
        let result = try run("keyctl", ["session", "-", "/bin/sh", "-c",
                                        #"keyctl padd user "$1" @s < "$2" >/dev/null && exec "$3" cat "$4" notes.txt --key-keyring "$1""#,
                                        "sh", description, payload, try Tools.inspect(), bundle])
        assertSuccess(result)
        XCTAssertEqual(result.stdout, contents)
        XCTAssertFalse(try keyringHasUserKey(description), "the key should have lived only in that session")
    }

    /// The session keyring comes before the user keyring: with the right
    /// key in the session and a wrong one of the same description in `@u`,
    /// the bundle opens.
    func testInspect_SessionKeyringSearchedBeforeUserKeyring() throws {
        let description = uniqueKeyDescription("order")
        try addKeyringKey(description, payload: Array("\(randomHex())\n".utf8))
        let payload = try scratch.write("order-payload", try keyFileBytes(), mode: 0o600)
        let result = try run("keyctl", ["session", "-", "/bin/sh", "-c",
                                        #"keyctl padd user "$1" @s < "$2" >/dev/null && exec "$3" cat "$4" notes.txt --key-keyring "$1""#,
                                        "sh", description, payload, try Tools.inspect(), bundle])
        assertSuccess(result)
        XCTAssertEqual(result.stdout, contents)
    }

    /// A key only in the user's persistent keyring (linked into an
    /// anonymous session just long enough to add it) is found: the
    /// persistent keyring is searched last.
    func testInspect_KeyOnlyInPersistentKeyring() throws {
        let description = uniqueKeyDescription("persistent")
        let payload = try scratch.write("persistent-payload", try keyFileBytes(), mode: 0o600)
        let added = try run("keyctl", ["session", "-", "/bin/sh", "-c",
                                       #"ring=$(keyctl get_persistent @s) && keyctl padd user "$1" "$ring" < "$2""#,
                                       "sh", description, payload])
        if added.errorOutput.contains("not supported") { throw XCTSkip("this kernel has no persistent keyrings") }
        assertSuccess(added)
        addTeardownBlock {
            _ = try? Subprocess.run("keyctl", ["session", "-", "/bin/sh", "-c",
                                               #"ring=$(keyctl get_persistent @s) && keyctl unlink "$(keyctl search "$ring" user "$1")" "$ring""#,
                                               "sh", description], timeout: 15)
        }
        XCTAssertFalse(try keyringHasUserKey(description), "the key must not be reachable from the session or user keyring")
        let cat = try inspect(["cat", bundle, "notes.txt", "--key-keyring", description])
        assertSuccess(cat)
        XCTAssertEqual(cat.stdout, contents)
    }

    func testMount_PassphraseFromKeyring() throws {
        let passphrase = "keyring passphrase \(UInt32.random(in: 0...UInt32.max))"
        registerSecret(passphrase, "the keyring passphrase")
        let passphraseFile = try makePassphraseFile("pass", passphrase)
        let passBundle = scratch.url("pass.encfs")
        assertSuccess(try pack(scratch.url("src"), passBundle,
                               ["--passphrase-file", passphraseFile, "--scrypt-log-n", "14", "--quiet"]))
        let description = uniqueKeyDescription("passphrase")
        // As `echo … | keyctl padd` stores it: with a newline, which is dropped.
        try addKeyringKey(description, payload: Array("\(passphrase)\n".utf8))
        let mounted = try mount(passBundle, keyArguments: ["--key-keyring", description, "--keyring-passphrase"])
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("notes.txt")).map(Array.init), contents)
        unmount(mounted)
        // Without --keyring-passphrase the same payload is not a hex key.
        try assertRejected(["--key-keyring", description], containing: ["must hold exactly 64 hex characters"], description: description)
    }

    // MARK: - Refusals

    /// Runs encfs-mount and `encfs-inspect cat` with `keyArguments` and
    /// requires for each: exit `status`, exactly one line on stderr (hints
    /// aside) `tool: error: …` holding every fragment and the description,
    /// nothing on stdout, nothing mounted.
    private func assertRejected(_ keyArguments: [String], status: Int32 = 1, containing fragments: [String],
                                description: String?, file: StaticString = #filePath, line: UInt = #line) throws {
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt-refused"))
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let commands: [(String, [String])] = [
            ("encfs-mount", [try Tools.mount(), bundle, mountpoint] + keyArguments),
            ("encfs-inspect", [try Tools.inspect(), "cat", bundle, "notes.txt"] + keyArguments),
        ]
        for (name, command) in commands {
            let result = try run(command[0], Array(command.dropFirst()), timeout: 30)
            XCTAssertEqual(result.status, status, result.summary, file: file, line: line)
            let lines = result.errorLines.filter { !$0.hasPrefix("hint: ") }
            XCTAssertEqual(lines.count, 1, "\(name): \(result.errorOutput)", file: file, line: line)
            let first = lines.first ?? ""
            XCTAssertTrue(first.hasPrefix("\(name): error: "), first, file: file, line: line)
            for fragment in fragments + (description.map { ["\"\($0)\""] } ?? []) {
                XCTAssertTrue(first.contains(fragment), "\(name): missing \"\(fragment)\" in: \(first)", file: file, line: line)
            }
            XCTAssertEqual(result.output, "", "\(name): stdout", file: file, line: line)
            XCTAssertFalse(MountTable.isMounted(mountpoint), "\(name): mounted", file: file, line: line)
        }
    }

    func testRefused_MissingKey() throws {
        let description = uniqueKeyDescription("missing")
        try assertRejected(["--key-keyring", description],
                           containing: ["no user key", "in the session, user or persistent keyring"], description: description)
    }

    func testRefused_ExpiredKey() throws {
        let description = uniqueKeyDescription("expired")
        let id = try addKeyringKey(description, payload: try keyFileBytes())
        try expireKeyringKey(id)
        try assertRejected(["--key-keyring", description], containing: ["has expired"], description: description)
    }

    func testRefused_RevokedKey() throws {
        let description = uniqueKeyDescription("revoked")
        let id = try addKeyringKey(description, payload: try keyFileBytes())
        try check("keyctl", ["revoke", id])
        try assertRejected(["--key-keyring", description], containing: ["has been revoked"], description: description)
    }

    func testRefused_LogonKeyOfTheSameDescription() throws {
        let description = uniqueKeyDescription("logon")
        try addKeyringKey(description, payload: try keyFileBytes(), type: "logon")
        try assertRejected(["--key-keyring", description], containing: ["is a logon key, not a user key"],
                           description: description)
    }

    func testRefused_KeyringOfTheSameDescription() throws {
        let description = uniqueKeyDescription("keyring")
        try addKeyringKeyring(description)
        try assertRejected(["--key-keyring", description], containing: ["is a keyring key, not a user key"],
                           description: description)
    }

    func testRefused_WrongLength() throws {
        let description = uniqueKeyDescription("short")
        try addKeyringKey(description, payload: Array("\(randomHex(bytes: 16))\n".utf8))
        try assertRejected(["--key-keyring", description], containing: ["must hold exactly 64 hex characters"],
                           description: description)
    }

    func testRefused_NotHex() throws {
        let description = uniqueKeyDescription("not-hex")
        try addKeyringKey(description, payload: Array(String(repeating: "zq", count: 32).utf8))
        try assertRejected(["--key-keyring", description], containing: ["not a hex digit"], description: description)
    }

    func testRefused_EmptyPassphrase() throws {
        let description = uniqueKeyDescription("empty-passphrase")
        try addKeyringKey(description, payload: [0x0A])
        try assertRejected(["--key-keyring", description, "--keyring-passphrase"], containing: ["holds an empty passphrase"],
                           description: description)
    }

    /// A well-formed key that opens no slot: the bundle's usual wrong-key
    /// refusal, after the keyring read succeeded.
    func testRefused_WrongKeyInKeyring() throws {
        let description = uniqueKeyDescription("wrong")
        try addKeyringKey(description, payload: Array("\(randomHex())\n".utf8))
        try assertRejected(["--key-keyring", description], containing: ["key"], description: nil)
    }

    func testUsage_KeyringPassphraseAlone() throws {
        try assertRejected(["--keyring-passphrase"], status: 2, containing: ["--keyring-passphrase needs --key-keyring"],
                           description: nil)
    }
}
