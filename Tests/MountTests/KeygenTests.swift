import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-keygen`: an X25519 identity as PKCS#8 PEM with mode 0600 and its
/// recipient in FILE.pub, both read by the `openssl` command line; raw keys
/// with `--symmetric`; existing files are never replaced without `--force`;
/// without `-o` the private key goes to stdout.
final class KeygenTests: KeyTestCase {
    /// Permission bits of `path`.
    private func mode(_ path: String) throws -> mode_t {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw SubprocessError("stat \(path): \(String(cString: strerror(errno)))") }
        return st.st_mode & 0o7777
    }

    private func contents(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SubprocessError("cannot read \(path)") }
        return Array(data)
    }

    /// Runs `encfs-keygen ARGUMENTS` with umask 000, so the modes checked
    /// afterwards come from encfs-keygen alone.
    private func keygenWithOpenUmask(_ arguments: [String]) throws -> ProcessResult {
        try sh(#"umask 000; exec "$@""#, [try Tools.keygen()] + arguments)
    }

    private func assertRefused(_ result: ProcessResult, _ path: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput, file: file, line: line)
        let first = result.errorLines.first ?? ""
        XCTAssertTrue(first.hasPrefix("encfs-keygen: error: refusing to overwrite"), first, file: file, line: line)
        XCTAssertTrue(first.contains(path), first, file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
    }

    func testKeygen_WritesIdentityAndRecipientThatOpenSSLReads() throws {
        let key = scratch.url("host.key")
        let result = try keygenWithOpenUmask(["-o", key])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.stderr, [], result.errorOutput)
        try registerSecretFile(key)
        XCTAssertEqual(try mode(key), 0o600)
        XCTAssertEqual(try mode(key + ".pub"), 0o644)

        // PKCS#8 (label PRIVATE KEY), an X25519 key for openssl.
        let pem = String(decoding: try contents(key), as: UTF8.self)
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), "not PKCS#8 PEM")
        XCTAssertTrue(pem.hasSuffix("-----END PRIVATE KEY-----\n"), "not PKCS#8 PEM")
        let parsed = try check("openssl", ["pkey", "-in", key, "-noout", "-text_pub"])
        XCTAssertTrue(parsed.output.contains("X25519 Public-Key"), parsed.output)
        // FILE.pub is the public half, byte for byte as openssl writes it.
        let publicHalf = try check("openssl", ["pkey", "-in", key, "-pubout"]).stdout
        XCTAssertEqual(try contents(key + ".pub"), publicHalf)
        let pub = try check("openssl", ["pkey", "-pubin", "-in", key + ".pub", "-noout", "-text"])
        XCTAssertTrue(pub.output.contains("X25519 Public-Key"), pub.output)

        // stdout: the recipient, then its fingerprint (SHA-256 of the DER).
        let fingerprint = try fingerprint(ofPublicKey: key + ".pub")
        XCTAssertEqual(result.output, String(decoding: publicHalf, as: UTF8.self) + "# recipient fingerprint: \(fingerprint)\n")
    }

    func testKeygen_RefusesToOverwriteWithoutForce() throws {
        let identity = try keygenIdentity("host.key")
        let raw = try makeRawKey()
        try scratch.write("lonely.key.pub", Array("not a key, but mine\n".utf8))
        let before = try snapshot(scratch.path)

        assertRefused(try keygen(["-o", identity.key]), identity.key)
        assertRefused(try keygen(["-o", raw, "--symmetric"]), raw)
        // FILE.pub alone is enough to refuse, and FILE is not created.
        assertRefused(try keygen(["-o", scratch.url("lonely.key")]), scratch.url("lonely.key.pub"))
        assertUnchanged(before, try snapshot(scratch.path), "refused keygen")
    }

    func testKeygen_ForceReplacesBothFiles() throws {
        let old = try keygenIdentity("host.key")
        let oldKey = try contents(old.key)
        let oldPub = try contents(old.recipient)
        chmod(old.key, 0o644)
        let result = try keygenWithOpenUmask(["-o", old.key, "--force"])
        XCTAssertEqual(result.status, 0, result.summary)
        try registerSecretFile(old.key)
        XCTAssertNotEqual(try contents(old.key), oldKey)
        XCTAssertNotEqual(try contents(old.recipient), oldPub)
        XCTAssertEqual(try mode(old.key), 0o600)
        XCTAssertEqual(try check("openssl", ["pkey", "-in", old.key, "-pubout"]).stdout, try contents(old.recipient))
        let fingerprint = try fingerprint(ofPublicKey: old.recipient)
        XCTAssertNotEqual(fingerprint, old.fingerprint)
        XCTAssertTrue(result.output.hasSuffix("# recipient fingerprint: \(fingerprint)\n"), result.output)

        let raw = try makeRawKey()
        let oldRaw = try contents(raw)
        XCTAssertEqual(try keygen(["--symmetric", "-o", raw, "--force"]).status, 0)
        try registerSecretFile(raw)
        XCTAssertNotEqual(try contents(raw), oldRaw)
    }

    func testKeygenSymmetric_WritesHexKeyThatWorksAsKeyFile() throws {
        let raw = scratch.url("raw.key")
        let result = try keygenWithOpenUmask(["--symmetric", "-o", raw])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.stdout, [])
        XCTAssertEqual(result.stderr, [])
        try registerSecretFile(raw)
        XCTAssertEqual(try mode(raw), 0o600)
        let text = String(decoding: try contents(raw), as: UTF8.self)
        XCTAssertNotNil(text.wholeMatch(of: /[0-9a-f]{64}\n/), "\(text.count) bytes, not 64 hex digits and a newline")

        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("symmetric\n".utf8))
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        XCTAssertEqual(try slots(bundle).map(\.kind), ["raw-key"])
        XCTAssertEqual(try inspect(["cat", bundle, "file", "--key-file", raw]).output, "symmetric\n")
        let mounted = try mount(bundle, keyFile: raw)
        try assertSameTree(source, mounted.mountpoint)

        // A second key is a different key.
        let second = scratch.url("second.key")
        XCTAssertEqual(try keygen(["--symmetric", "-o", second]).status, 0)
        try registerSecretFile(second)
        XCTAssertNotEqual(try contents(second), try contents(raw))
    }

    func testKeygen_WithoutOutput_PrintsPrivateKeyToStdout() throws {
        let before = try snapshot(scratch.path)
        let result = try keygen([])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(try snapshot(scratch.path), before, "encfs-keygen without -o wrote a file")
        // stdout holds the private key only; it must not show up on stderr.
        let printed = try scratch.write("printed.key", result.stdout, mode: 0o600)
        try registerSecretFile(printed)
        XCTAssertTrue(result.output.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), "stdout is not a PKCS#8 PEM key")
        XCTAssertTrue(result.output.hasSuffix("-----END PRIVATE KEY-----\n"), "stdout holds more than the key")
        // stderr: the recipient of that key and its fingerprint.
        let publicHalf = try check("openssl", ["pkey", "-in", printed, "-pubout"])
        let pub = try scratch.write("printed.pub", publicHalf.stdout)
        let fingerprint = try fingerprint(ofPublicKey: pub)
        XCTAssertEqual(result.errorOutput, "encfs-keygen: recipient (fingerprint \(fingerprint)):\n" + publicHalf.output)

        // The printed key works as an identity.
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("printed\n".utf8))
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", pub, "-q"]))
        XCTAssertEqual(try inspect(["cat", bundle, "file", "--identity", printed]).output, "printed\n")

        let symmetric = try keygen(["--symmetric"])
        XCTAssertEqual(symmetric.status, 0, symmetric.summary)
        XCTAssertNotNil(symmetric.output.wholeMatch(of: /[0-9a-f]{64}\n/), "not 64 hex digits and a newline")
        registerSecret(symmetric.output.trimmingCharacters(in: .newlines), "the key encfs-keygen --symmetric printed")
    }

    func testKeygen_UsageErrorsExitTwo() throws {
        let before = try snapshot(scratch.path)
        for arguments in [["extra"], ["-o"], ["--bogus"], ["--symmetric", "-o", scratch.url("a"), "extra"]] {
            let result = try keygen(arguments)
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-keygen: error: ") ?? false, result.errorOutput)
            XCTAssertEqual(result.stdout, [])
        }
        assertUnchanged(before, try snapshot(scratch.path), "usage errors")
    }
}
