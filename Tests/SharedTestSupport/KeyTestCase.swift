import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Base class of the tests of recipients, key slots, rekeying,
/// `encfs-keygen` and `encfs-inspect`: helpers that make keys with
/// `encfs-keygen` and the `openssl` command line, run the tools, and take
/// snapshots of files.
///
/// Every secret a test makes (key hex, passphrase, private-key PEM body) is
/// registered, and every command the test runs has its stderr kept; at
/// teardown the test fails if any secret appears in any stderr.
open class KeyTestCase: ToolTestCase {
    private var secrets: [(label: String, bytes: [UInt8])] = []
    private var standardErrors: [(command: String, bytes: [UInt8])] = []

    open override func setUpWithError() throws {
        try super.setUpWithError()
        secrets = []
        standardErrors = []
    }

    open override func tearDownWithError() throws {
        for (label, secret) in secrets {
            for (command, stderr) in standardErrors where contains(stderr, secret) {
                XCTFail("\(label) appears in the stderr of `\(command)`")
            }
        }
        try super.tearDownWithError()
    }

    /// Runs `tool` and keeps its stderr for the teardown check.
    @discardableResult
    open override func run(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
                      timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        let result = try super.run(tool, arguments, environment: environment, timeout: timeout)
        standardErrors.append((result.command.joined(separator: " "), result.stderr))
        return result
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    // MARK: - Secrets

    /// Registers `text` as a secret that no stderr may contain.
    open func registerSecret(_ text: String, _ label: String) {
        secrets.append((label, Array(text.utf8)))
    }

    /// Registers the secret in the file at `path`: each base64 line of a PEM
    /// block, or else the trimmed contents (a hex key also in upper case).
    open func registerSecretFile(_ path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw SubprocessError("cannot read \(path)") }
        let text = String(decoding: data, as: UTF8.self)
        if text.contains("-----BEGIN") {
            for line in text.split(separator: "\n") where !line.hasPrefix("-----") && line.count >= 16 {
                registerSecret(String(line), "a line of the private key \(path)")
            }
            return
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        registerSecret(trimmed, "the secret in \(path)")
        if trimmed.count == 64 { registerSecret(trimmed.uppercased(), "the key in \(path), upper case") }
    }

    /// A fresh random key file (64 hex digits), registered as a secret.
    open func makeRawKey(_ name: String = "raw.key") throws -> String {
        let path = try makeKeyFile(name)
        try registerSecretFile(path)
        return path
    }

    /// A passphrase file holding `passphrase` and a newline, registered as a secret.
    open func makePassphraseFile(_ name: String = "passphrase", _ passphrase: String = "tr0ub4dor & 3 ✓ \(UInt32.random(in: 0...UInt32.max))")
        throws -> String {
        let path = try scratch.write(name, Array("\(passphrase)\n".utf8), mode: 0o600)
        registerSecret(passphrase, "the passphrase in \(name)")
        return path
    }

    // MARK: - Identities

    /// `encfs-keygen -o NAME`: the identity, its `.pub`, and the fingerprint
    /// `encfs-keygen` printed (checked against OpenSSL's).
    open func keygenIdentity(_ name: String) throws -> Identity {
        let key = scratch.url(name)
        let result = try check(try Tools.keygen(), ["-o", key])
        try registerSecretFile(key)
        let printed = result.output.split(separator: "\n").compactMap { line -> String? in
            let prefix = "# recipient fingerprint: "
            return line.hasPrefix(prefix) ? String(line.dropFirst(prefix.count)) : nil
        }
        guard printed.count == 1 else { throw SubprocessError("no fingerprint in encfs-keygen output: \(result.output)") }
        let identity = Identity(key: key, recipient: key + ".pub", fingerprint: printed[0])
        let expected = try fingerprint(ofPublicKey: identity.recipient)
        guard expected == identity.fingerprint else {
            throw SubprocessError("encfs-keygen printed fingerprint \(identity.fingerprint), openssl gives \(expected)")
        }
        return identity
    }

    /// `openssl genpkey -algorithm X25519` and `openssl pkey -pubout`.
    open func opensslX25519(_ name: String) throws -> Identity {
        try opensslIdentity(name, ["-algorithm", "X25519"])
    }

    /// An RSA key pair of `bits` bits made by `openssl genpkey`, generated
    /// once per test process for each `variant` and written to `name`.
    open func opensslRSA(_ name: String, bits: Int = 2048, variant: String = "a") throws -> Identity {
        let cacheKey = "rsa-\(bits)-\(variant)"
        let pem = try OpenSSLKeyCache.privateKey(cacheKey) {
            let path = scratch.url("\(cacheKey).generated")
            try check("openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)", "-out", path])
            guard let data = FileManager.default.contents(atPath: path) else { throw SubprocessError("no \(path)") }
            unlink(path)
            return Array(data)
        }
        let key = try scratch.write(name, pem, mode: 0o600)
        return try finishOpenSSLIdentity(key)
    }

    /// `openssl genpkey GENPKEY_ARGUMENTS -out NAME` and `openssl pkey
    /// -pubout -out NAME.pub`.
    open func opensslIdentity(_ name: String, _ genpkeyArguments: [String]) throws -> Identity {
        let key = scratch.url(name)
        try check("openssl", ["genpkey"] + genpkeyArguments + ["-out", key])
        return try finishOpenSSLIdentity(key)
    }

    private func finishOpenSSLIdentity(_ key: String) throws -> Identity {
        try registerSecretFile(key)
        let recipient = key + ".pub"
        try check("openssl", ["pkey", "-in", key, "-pubout", "-out", recipient])
        return Identity(key: key, recipient: recipient, fingerprint: try fingerprint(ofPublicKey: recipient))
    }

    /// The first 8 bytes of SHA-256 over the DER SubjectPublicKeyInfo of
    /// the PEM public key at `path`, computed with `openssl` and `sha256sum`.
    open func fingerprint(ofPublicKey path: String) throws -> String {
        let result = try sh(#"openssl pkey -pubin -in "$1" -outform DER | sha256sum"#, [path])
        guard result.status == 0, result.output.count >= 16 else { throw SubprocessError(result.summary) }
        return String(result.output.prefix(16))
    }

    // MARK: - Tools

    /// Runs `encfs-inspect ARGUMENTS`.
    @discardableResult
    open func inspect(_ arguments: [String], environment: [String: String?] = [:]) throws -> ProcessResult {
        try run(try Tools.inspect(), arguments, environment: environment)
    }

    /// Runs `encfs-keygen ARGUMENTS`.
    @discardableResult
    open func keygen(_ arguments: [String], environment: [String: String?] = [:]) throws -> ProcessResult {
        try run(try Tools.keygen(), arguments, environment: environment)
    }

    /// `encfs-inspect info BUNDLE --json [KEY_ARGUMENTS]`, decoded.
    open func info(_ bundle: String, _ keyArguments: [String] = []) throws -> [String: Any] {
        let result = try check(try Tools.inspect(), ["info", bundle, "--json"] + keyArguments)
        guard let object = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any] else {
            throw SubprocessError("info --json is not an object: \(result.output)")
        }
        return object
    }

    /// The key slots of `bundle` as `(kind, fingerprint)`, from `info --json`
    /// without a key.
    open func slots(_ bundle: String) throws -> [Slot] {
        guard let list = try info(bundle)["slots"] as? [[String: Any]] else { throw SubprocessError("no slots in info --json") }
        return list.map { Slot(kind: $0["kind"] as? String ?? "?", fingerprint: $0["fingerprint"] as? String ?? "?") }
    }

    /// A key slot as `encfs-inspect info` lists it.
    public struct Slot: Equatable, CustomStringConvertible {
        public let kind: String
        public let fingerprint: String
        public var description: String { "\(kind) \(fingerprint)" }

        public init(kind: String, fingerprint: String) {
            self.kind = kind
            self.fingerprint = fingerprint
        }
    }

    /// Asserts that `diff -r` finds no difference between two trees.
    open func assertSameTree(_ expected: String, _ actual: String, _ message: String = "",
                        file: StaticString = #filePath, line: UInt = #line) throws {
        let diff = try run("diff", ["-r", expected, actual])
        XCTAssertEqual(diff.status, 0, "\(message) \(diff.output) \(diff.summary)", file: file, line: line)
    }

    /// `sha256sum` of a file, 64 hex digits.
    open func sha256(_ path: String) throws -> String {
        String(try check("sha256sum", [path]).output.prefix(64))
    }

    // MARK: - Snapshots

    /// Every entry below `root` (not following symlinks) with its type,
    /// mode, size, mtime in nanoseconds and the SHA-256 of its contents, one
    /// line each; names byte-exact (Python `repr` of the bytes).
    open func snapshot(_ root: String) throws -> [String] {
        let script = #"""
import hashlib, os, stat, sys
root = os.fsencode(sys.argv[1])
out = []
def add(p):
    st = os.lstat(p)
    digest = ""
    if stat.S_ISREG(st.st_mode):
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    elif stat.S_ISLNK(st.st_mode):
        digest = repr(os.readlink(p))
    out.append("%r %o %d %d %s" % (os.path.relpath(p, root), st.st_mode, st.st_size, st.st_mtime_ns, digest))
add(root)
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        add(os.path.join(dirpath, name))
print("\n".join(sorted(out)))
"""#
        let result = try python(script, [root])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result.output.split(separator: "\n").map(String.init)
    }

    /// Asserts that two snapshots are equal, naming the entries that differ.
    open func assertUnchanged(_ before: [String], _ after: [String], _ message: String,
                         file: StaticString = #filePath, line: UInt = #line) {
        guard before != after else { return }
        let gone = Set(before).subtracting(after).sorted()
        let new = Set(after).subtracting(before).sorted()
        XCTFail("\(message): files changed; before: \(gone); after: \(new)", file: file, line: line)
    }
}
