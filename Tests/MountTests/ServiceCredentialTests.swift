import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `--key-credential NAME` / `--passphrase-credential NAME` and the
/// example unit `examples/systemd/encfs-assets.service`.
///
/// systemd is not PID 1 on the test machines, so the service itself cannot
/// run; what it does is done here step by step with the real tools:
/// `systemd-creds encrypt --with-key=host` seals the key (the host key is a
/// scratch file, through `SYSTEMD_CREDENTIAL_SECRET`), `systemd-creds
/// decrypt` opens it into a private directory as the service manager does
/// for `LoadCredentialEncrypted=`, and encfs-mount runs with the unit's own
/// ExecStart arguments and `CREDENTIALS_DIRECTORY` set. `systemd-analyze
/// verify` checks the unit.
final class ServiceCredentialTests: KeyTestCase {
    private var keyFile = ""
    private var bundle = ""
    private let contents = Array("served with a key from a service credential\n".utf8)

    private static let unitPath = "\(Tools.repositoryRoot)/examples/systemd/encfs-assets.service"

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/notes.txt", contents)
        try scratch.write("src/data.bin", (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ $0 >> 10) })
        keyFile = try makeRawKey()
        bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: keyFile)
    }

    private func requireTool(_ name: String) throws {
        guard access("/usr/bin/\(name)", X_OK) == 0 || access("/bin/\(name)", X_OK) == 0 else {
            throw SubprocessError("\(name) is missing: run Scripts/install-deps.sh (Debian systemd)")
        }
    }

    // MARK: - The example unit

    /// The unit's lines `Key=value` for `key`, in order.
    private func unitValues(_ key: String) throws -> [String] {
        let text = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            line.hasPrefix("\(key)=") ? String(line.dropFirst(key.count + 1)) : nil
        }
    }

    /// The credential name of the unit's `LoadCredentialEncrypted=NAME:PATH`.
    private func unitCredentialName() throws -> String {
        let lines = try unitValues("LoadCredentialEncrypted")
        guard lines.count == 1, let name = lines[0].split(separator: ":").first else {
            throw SubprocessError("the example unit should have one LoadCredentialEncrypted=NAME:PATH line")
        }
        return String(name)
    }

    /// The unit's ExecStart words after `encfs-mount BUNDLE MOUNTPOINT`.
    private func unitMountOptions() throws -> [String] {
        let lines = try unitValues("ExecStart")
        guard lines.count == 1 else { throw SubprocessError("the example unit should have one ExecStart= line") }
        let words = lines[0].split(separator: " ").map(String.init)
        guard words.count > 3, words[0].hasSuffix("/encfs-mount") else {
            throw SubprocessError("the example's ExecStart should run encfs-mount BUNDLE MOUNTPOINT …: \(lines[0])")
        }
        return Array(words.dropFirst(3))
    }

    /// `systemd-analyze verify` on a copy of the unit whose ExecStart runs
    /// the binary under test (verify requires the program to exist):
    /// exit 0 and not one warning (an unknown or misspelled setting is only
    /// a warning).
    func testExampleUnit_PassesSystemdAnalyzeVerify() throws {
        try requireTool("systemd-analyze")
        let original = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
        XCTAssertTrue(original.contains("ExecStart=/usr/local/bin/encfs-mount "), "the example installs to /usr/local/bin")
        let copy = original.replacingOccurrences(of: "ExecStart=/usr/local/bin/encfs-mount ", with: "ExecStart=\(try Tools.mount()) ")
        let unit = try scratch.write("encfs-assets.service", Array(copy.utf8))
        let result = try run("systemd-analyze", ["verify", unit])
        assertSuccess(result)
        XCTAssertEqual(result.errorOutput, "", "systemd-analyze verify warned")
        XCTAssertEqual(try unitMountOptions().filter { $0.hasPrefix("--key") }, ["--key-credential"])
    }

    // MARK: - The credential path

    /// Seals the key file with `systemd-creds encrypt --with-key=host`
    /// under the credential name `name`, the host key being a scratch file.
    ///
    /// - Returns: the encrypted credential and the host-key path.
    private func sealKey(_ plaintext: String, name: String) throws -> (credential: String, hostSecret: String) {
        try requireTool("systemd-creds")
        let secretDirectory = try scratch.makeDirectory(uniqueName("host-secret"))
        chmod(secretDirectory, 0o700)
        // systemd-creds makes the host key (mode 0400) when it is missing.
        let hostSecret = "\(secretDirectory)/credential.secret"
        let credential = scratch.url("\(uniqueName("assets")).cred")
        try check("systemd-creds", ["encrypt", "--with-key=host", "--name=\(name)", plaintext, credential],
                  environment: ["SYSTEMD_CREDENTIAL_SECRET": hostSecret])
        return (credential, hostSecret)
    }

    /// Opens `credential` into a fresh private directory as the service
    /// manager does for `LoadCredentialEncrypted=` (directory 0700, file
    /// 0400).
    ///
    /// - Returns: the directory, for `CREDENTIALS_DIRECTORY`.
    private func openCredential(_ credential: String, name: String, hostSecret: String) throws -> String {
        let directory = try scratch.makeDirectory(uniqueName("credentials"))
        chmod(directory, 0o700)
        let opened = "\(directory)/\(name)"
        try check("systemd-creds", ["decrypt", "--name=\(name)", credential, opened],
                  environment: ["SYSTEMD_CREDENTIAL_SECRET": hostSecret])
        chmod(opened, 0o400)
        return directory
    }

    func testExampleUnit_MountsWithTheSealedCredential() throws {
        let name = try unitCredentialName()
        let (credential, hostSecret) = try sealKey(keyFile, name: name)
        let sealed = try XCTUnwrap(FileManager.default.contents(atPath: credential))
        let key = try String(contentsOfFile: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNil(String(decoding: sealed, as: UTF8.self).range(of: key), "the sealed credential holds the key in the clear")
        let directory = try openCredential(credential, name: name, hostSecret: hostSecret)
        // The unit's own options (`--key-credential NAME -f`), as the service runs them.
        let options = try unitMountOptions()
        XCTAssertTrue(options.contains("-f"), "the example runs in the foreground (Type=simple)")
        let mounted = try mount(bundle, keyArguments: options.filter { $0 != "-f" },
                                environment: ["CREDENTIALS_DIRECTORY": directory], foreground: true)
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("notes.txt")).map(Array.init), contents)
        try assertSameTree(scratch.url("src"), mounted.mountpoint)
        unmount(mounted)
    }

    /// The credential opens only with the host key it was sealed with.
    func testSealedCredential_RefusesAnotherHostKey() throws {
        let (credential, _) = try sealKey(keyFile, name: "assets.key")
        let other = try sealKey(keyFile, name: "other.key")
        let directory = try scratch.makeDirectory("credentials-other")
        let result = try run("systemd-creds", ["decrypt", "--name=assets.key", credential, "\(directory)/assets.key"],
                             environment: ["SYSTEMD_CREDENTIAL_SECRET": other.hostSecret])
        XCTAssertNotEqual(result.status, 0, result.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/assets.key"))
    }

    func testInspect_PassphraseCredential() throws {
        let passphraseFile = try makePassphraseFile("pass")
        let passBundle = scratch.url("pass.encfs")
        assertSuccess(try pack(scratch.url("src"), passBundle,
                               ["--passphrase-file", passphraseFile, "--scrypt-log-n", "14", "--quiet"]))
        let (credential, hostSecret) = try sealKey(passphraseFile, name: "assets.passphrase")
        let directory = try openCredential(credential, name: "assets.passphrase", hostSecret: hostSecret)
        let cat = try inspect(["cat", passBundle, "notes.txt", "--passphrase-credential", "assets.passphrase"],
                              environment: ["CREDENTIALS_DIRECTORY": directory])
        assertSuccess(cat)
        XCTAssertEqual(cat.stdout, contents)
    }

    // MARK: - Refusals

    /// Runs encfs-mount and `encfs-inspect cat` and requires for each:
    /// exit 1, exactly one line (hints aside) `tool: error: …` holding every
    /// fragment, nothing on stdout, nothing mounted.
    private func assertRejected(_ keyArguments: [String], environment: [String: String?], containing fragments: [String],
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt-refused"))
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let commands: [(String, [String])] = [
            ("encfs-mount", [try Tools.mount(), bundle, mountpoint] + keyArguments),
            ("encfs-inspect", [try Tools.inspect(), "cat", bundle, "notes.txt"] + keyArguments),
        ]
        for (name, command) in commands {
            let result = try run(command[0], Array(command.dropFirst()), environment: environment, timeout: 30)
            XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
            let lines = result.errorLines.filter { !$0.hasPrefix("hint: ") }
            XCTAssertEqual(lines.count, 1, "\(name): \(result.errorOutput)", file: file, line: line)
            let first = lines.first ?? ""
            XCTAssertTrue(first.hasPrefix("\(name): error: "), first, file: file, line: line)
            for fragment in fragments {
                XCTAssertTrue(first.contains(fragment), "\(name): missing \"\(fragment)\" in: \(first)", file: file, line: line)
            }
            XCTAssertEqual(result.output, "", "\(name): stdout", file: file, line: line)
            XCTAssertFalse(MountTable.isMounted(mountpoint), "\(name): mounted", file: file, line: line)
        }
    }

    func testRefused_NoCredentialsDirectory() throws {
        try assertRejected(["--key-credential", "assets.key"], environment: ["CREDENTIALS_DIRECTORY": nil],
                           containing: ["CREDENTIALS_DIRECTORY is not set", "\"assets.key\""])
    }

    func testRefused_MissingCredential() throws {
        let directory = try scratch.makeDirectory("credentials")
        try assertRejected(["--key-credential", "assets.key"], environment: ["CREDENTIALS_DIRECTORY": directory],
                           containing: ["cannot read credential \"assets.key\"", "No such file or directory"])
    }

    func testRefused_CredentialOfWrongLength() throws {
        let directory = try scratch.makeDirectory("credentials")
        try scratch.write("credentials/assets.key", Array("\(randomHex(bytes: 31))\n".utf8), mode: 0o400)
        try assertRejected(["--key-credential", "assets.key"], environment: ["CREDENTIALS_DIRECTORY": directory],
                           containing: ["credential \"assets.key\" must hold exactly 64 hex characters"])
    }

    /// A credential that is a FIFO (systemd only makes regular files) is
    /// refused at once rather than blocking the start for ever.
    func testRefused_CredentialThatIsAFIFO() throws {
        let directory = try scratch.makeDirectory("credentials")
        XCTAssertEqual(mkfifo("\(directory)/assets.key", 0o600), 0, String(cString: strerror(errno)))
        try assertRejected(["--key-credential", "assets.key"], environment: ["CREDENTIALS_DIRECTORY": directory],
                           containing: ["cannot read credential \"assets.key\": read (not a regular file) failed"])
    }

    func testRefused_CredentialNotHex() throws {
        let directory = try scratch.makeDirectory("credentials")
        try scratch.write("credentials/assets.key", Array(String(repeating: "g", count: 64).utf8), mode: 0o400)
        try assertRejected(["--key-credential", "assets.key"], environment: ["CREDENTIALS_DIRECTORY": directory],
                           containing: ["credential \"assets.key\" holds a character that is not a hex digit"])
    }

    /// A name that would leave the credentials directory is refused before
    /// anything is opened, even when the file it points to is a good key.
    func testRefused_NameThatIsNotAPlainFileName() throws {
        let directory = try scratch.makeDirectory("credentials")
        for name in ["../raw.key", "..", ".", "sub/assets.key", ""] {
            try assertRejected(["--key-credential", name], environment: ["CREDENTIALS_DIRECTORY": directory],
                               containing: ["must be a plain file name"])
        }
    }

    func testRefused_EmptyPassphraseCredential() throws {
        let directory = try scratch.makeDirectory("credentials")
        try scratch.write("credentials/assets.passphrase", [0x0A], mode: 0o400)
        try assertRejected(["--passphrase-credential", "assets.passphrase"], environment: ["CREDENTIALS_DIRECTORY": directory],
                           containing: ["credential \"assets.passphrase\" holds an empty passphrase"])
    }
}
