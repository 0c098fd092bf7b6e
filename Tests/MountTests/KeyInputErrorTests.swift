import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Bad key input and damaged key slots: each gives exactly one
/// `tool: error: …` line on stderr naming what is wrong, exit 1 (or 2 for
/// usage), no stdout, no mount, and every file in the scratch directory
/// stays as it was (bytes, mode and mtime). No secret appears in any stderr
/// (checked by ``KeyTestCase`` for every command run here).
final class KeyInputErrorTests: KeyTestCase {
    private var source = ""
    private var raw = ""
    private var host: Identity?
    /// Packed with `host` as recipient and `raw` as key.
    private var bundle = ""
    /// An existing bundle that failed packs must leave alone.
    private var output = ""
    private var mountpoint = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/hello.txt", Array("hello, errors\n".utf8))
        try scratch.write("src/data.bin", (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        raw = try makeRawKey()
        let host = try keygenIdentity("host.key")
        self.host = host
        bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", host.recipient, "--key-file", raw, "-q"]))
        output = scratch.url("out.encfs")
        assertSuccess(try pack(source, output, ["--key-file", raw, "-q"]))
        mountpoint = try scratch.makeDirectory("mnt")
        let mnt = mountpoint
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
    }

    /// Runs `tool arguments` and asserts the failure: `status`, one error
    /// line (hints aside) starting `tool: error: ` and containing every
    /// fragment, no stdout, nothing mounted, no file changed. Every refusal
    /// is quick: the command is killed after 30 s.
    private func assertRejected(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
                                status: Int32 = 1, containing fragments: [String],
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let before = try snapshot(scratch.path)
        let result = try run(tool, arguments, environment: environment, timeout: 30)
        let name = String(tool.split(separator: "/").last ?? "")
        let context = "\(name) \(arguments.map { $0.replacingOccurrences(of: scratch.path + "/", with: "") })"
        XCTAssertEqual(result.status, status, "\(context): \(result.summary)", file: file, line: line)
        let lines = result.errorLines.filter { !$0.hasPrefix("hint: ") }
        XCTAssertEqual(lines.count, 1, "\(context): \(result.errorOutput)", file: file, line: line)
        let first = lines.first ?? ""
        XCTAssertTrue(first.hasPrefix("\(name): error: "), "\(context): \(first)", file: file, line: line)
        XCTAssertFalse(first.hasSuffix("."), "\(context): error lines have no final period: \(first)", file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(first.contains(fragment), "\(context): missing \"\(fragment)\" in: \(first)", file: file, line: line)
        }
        XCTAssertEqual(result.output, "", "\(context): stdout", file: file, line: line)
        XCTAssertFalse(MountTable.isMounted(mountpoint), "\(context): mounted", file: file, line: line)
        if MountTable.isMounted(mountpoint) { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        assertUnchanged(before, try snapshot(scratch.path), context, file: file, line: line)
    }

    /// Asserts that `recipient` is refused with `fragments` by `encfs-pack
    /// --recipient` (over an existing bundle) and by `rekey --add-recipient`.
    private func assertRecipientRejected(_ recipient: String, containing fragments: [String],
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        try assertRejected(try Tools.pack(), [source, output, "--recipient", recipient],
                           containing: fragments + [recipient], file: file, line: line)
        try assertRejected(try Tools.inspect(), ["rekey", bundle, "--key-file", raw, "--add-recipient", recipient],
                           containing: fragments + [recipient], file: file, line: line)
    }

    /// Asserts that `identity` is refused with `fragments` by `encfs-mount`
    /// (option and `ENCFS_IDENTITY`), `encfs-inspect cat` and `encfs-pack --identity`.
    private func assertIdentityRejected(_ identity: String, containing fragments: [String],
                                        file: StaticString = #filePath, line: UInt = #line) throws {
        try assertRejected(try Tools.mount(), [bundle, mountpoint, "--identity", identity],
                           containing: fragments + [identity], file: file, line: line)
        try assertRejected(try Tools.mount(), [bundle, mountpoint], environment: ["ENCFS_IDENTITY": identity],
                           containing: fragments + [identity], file: file, line: line)
        try assertRejected(try Tools.inspect(), ["cat", bundle, "hello.txt", "--identity", identity],
                           containing: fragments + [identity], file: file, line: line)
        try assertRejected(try Tools.pack(), [source, output, "--identity", identity],
                           containing: fragments + [identity], file: file, line: line)
    }

    // MARK: - PEM files

    func testMalformedPEM_Refused() throws {
        let host = try XCTUnwrap(host)
        let body = try XCTUnwrap(String(contentsOfFile: host.recipient, encoding: .utf8).split(separator: "\n").dropFirst().first)
        let cases: [(name: String, text: String)] = [
            ("garbage-body.pem", "-----BEGIN PUBLIC KEY-----\nnot base64 at all!!\n-----END PUBLIC KEY-----\n"),
            ("truncated-body.pem", "-----BEGIN PUBLIC KEY-----\n\(body.prefix(20))\n-----END PUBLIC KEY-----\n"),
            ("no-end.pem", "-----BEGIN PUBLIC KEY-----\n\(body)\n"),
            ("mismatched.pem", "-----BEGIN PUBLIC KEY-----\n\(body)\n-----END PRIVATE KEY-----\n"),
            ("two-blocks.pem", String(repeating: "-----BEGIN PUBLIC KEY-----\n\(body)\n-----END PUBLIC KEY-----\n", count: 2)),
            ("not-pem.pem", "\(body)\n"),
            ("empty.pem", ""),
        ]
        for (name, text) in cases {
            let path = try scratch.write(name, Array(text.utf8))
            try assertRecipientRejected(path, containing: ["malformed PEM"])
        }
        let identity = try scratch.write("garbage-identity.pem",
                                         Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8), mode: 0o600)
        try assertIdentityRejected(identity, containing: ["malformed PEM"])
        let certificate = try scratch.write("cert.pem", Array("-----BEGIN CERTIFICATE-----\n\(body)\n-----END CERTIFICATE-----\n".utf8))
        try assertRecipientRejected(certificate, containing: ["unsupported PEM label \"CERTIFICATE\""])
    }

    func testPrivateKeyAsRecipient_Refused() throws {
        let host = try XCTUnwrap(host)
        let rsa = try opensslRSA("rsa.pem")
        let openssl = try opensslX25519("ossl.pem")
        for key in [host.key, rsa.key, openssl.key] {
            try assertRecipientRejected(key, containing: ["expected a public key but found a private key"])
        }
    }

    func testPublicKeyAsIdentity_Refused() throws {
        let host = try XCTUnwrap(host)
        let rsa = try opensslRSA("rsa.pem")
        for recipient in [host.recipient, rsa.recipient] {
            try assertIdentityRejected(recipient, containing: ["expected a private key but found a public key"])
        }
    }

    func testRSAUnder2048Bits_Refused() throws {
        let small = try opensslRSA("rsa1024.pem", bits: 1024)
        try assertRecipientRejected(small.recipient, containing: ["RSA key has 1024 bits; at least 2048 are required"])
        try assertIdentityRejected(small.key, containing: ["RSA key has 1024 bits; at least 2048 are required"])
    }

    func testUnsupportedKeyTypes_Refused() throws {
        let cases: [(name: String, genpkey: [String], type: String)] = [
            ("p256.pem", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], "EC"),
            ("ed25519.pem", ["-algorithm", "ED25519"], "Ed25519"),
            ("x448.pem", ["-algorithm", "X448"], "X448"),
        ]
        for (name, genpkey, type) in cases {
            let identity = try opensslIdentity(name, genpkey)
            try assertRecipientRejected(identity.recipient, containing: ["unsupported key type \(type)"])
            try assertIdentityRejected(identity.key, containing: ["unsupported key type \(type)"])
        }
        // The traditional "EC PRIVATE KEY" form, too.
        let traditional = scratch.url("ec-traditional.pem")
        try check("openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", traditional])
        try registerSecretFile(traditional)
        try assertIdentityRejected(traditional, containing: ["unsupported key type EC"])
    }

    func testEncryptedPrivateKey_RefusedWithoutPrompting() throws {
        let encrypted = scratch.url("encrypted.pem")
        try check("openssl", ["genpkey", "-algorithm", "X25519", "-aes-256-cbc", "-pass", "pass:hunter2-secret", "-out", encrypted])
        registerSecret("hunter2-secret", "the key's passphrase")
        try registerSecretFile(encrypted)
        try assertIdentityRejected(encrypted, containing: ["encrypted private keys are not supported"])
    }

    // MARK: - Wrong identities

    func testWrongIdentity_MountRefusedNamingSlotKinds() throws {
        let other = try keygenIdentity("other.key")
        let otherRSA = try opensslRSA("other-rsa.pem", variant: "b")
        let x25519Only = scratch.url("x25519.encfs")
        assertSuccess(try pack(source, x25519Only, ["--recipient", try XCTUnwrap(host).recipient, "-q"]))
        let rsa = try opensslRSA("rsa.pem")
        let mixed = scratch.url("mixed.encfs")
        assertSuccess(try pack(source, mixed, ["--recipient", try XCTUnwrap(host).recipient, "--recipient", rsa.recipient, "-q"]))

        for identity in [other.key, otherRSA.key] {
            try assertRejected(try Tools.mount(), [x25519Only, mountpoint, "--identity", identity],
                               containing: ["wrong key", "(the bundle has x25519 slots)", x25519Only])
            try assertRejected(try Tools.mount(), [mixed, mountpoint, "--identity", identity],
                               containing: ["wrong key", "(the bundle has x25519, rsa slots)"])
            try assertRejected(try Tools.mount(), [bundle, mountpoint], environment: ["ENCFS_IDENTITY": identity],
                               containing: ["wrong key", "(the bundle has raw-key, x25519 slots)"])
            try assertRejected(try Tools.inspect(), ["ls", mixed, "--identity", identity],
                               containing: ["wrong key", "x25519, rsa"])
        }
        // Several wrong secrets: still one line.
        try assertRejected(try Tools.mount(), [mixed, mountpoint, "--identity", other.key, "--identity", otherRSA.key,
                                               "--key-file", raw], containing: ["wrong key", "x25519, rsa"])
        // A missing identity file names the file.
        let missing = scratch.url("missing.key")
        try assertRejected(try Tools.mount(), [bundle, mountpoint, "--identity", missing],
                           containing: ["cannot read identity file", missing])
    }

    // MARK: - Key files

    func testBadKeyFiles_Refused() throws {
        let hex = randomHex()
        let cases: [(name: String, text: String, fragment: String)] = [
            ("short.key", String(hex.prefix(63)) + "\n", "key file must hold exactly 64 hex characters"),
            ("long.key", hex + "0\n", "key file must hold exactly 64 hex characters"),
            ("nonhex.key", String(hex.prefix(10)) + "g" + String(hex.dropFirst(11)) + "\n", "not a hex digit"),
            ("inner-space.key", String(hex.prefix(32)) + " " + String(hex.dropFirst(33)) + "\n", "not a hex digit"),
            ("empty.key", "", "key file is empty"),
            ("blank.key", " \n\t\n", "key file is empty"),
        ]
        for (name, text, fragment) in cases {
            let path = try scratch.write(name, Array(text.utf8), mode: 0o600)
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.count >= 16 { registerSecret(trimmed, "the bad key in \(name)") }
            // The fragment and then the path: the message tells what is
            // wrong, never how many characters the (secret) file holds.
            try assertRejected(try Tools.pack(), [source, output, "--key-file", path], containing: ["\(fragment) (\(path))"])
            try assertRejected(try Tools.mount(), [bundle, mountpoint, "--key-file", path], containing: [fragment, path])
            try assertRejected(try Tools.inspect(), ["cat", bundle, "hello.txt", "--key-file", path], containing: [fragment, path])
            try assertRejected(try Tools.inspect(), ["rekey", bundle, "--key-file", raw, "--add-key-file", path],
                               containing: [fragment, path])
        }
        let short = String(hex.prefix(63))
        try assertRejected(try Tools.mount(), [bundle, mountpoint], environment: ["ENCFS_KEY": short],
                           containing: ["error: ENCFS_KEY must hold exactly 64 hex characters"])
        try assertRejected(try Tools.pack(), [source, output], environment: ["ENCFS_KEY": short],
                           containing: ["error: ENCFS_KEY must hold exactly 64 hex characters"])
    }

    /// A named FIFO given as a key, passphrase or identity file, which
    /// nothing writes to, is refused at once instead of blocking the
    /// command in `open` for ever (each run is killed after 30 s).
    func testFIFOAsKeyFile_RefusedWithoutBlocking() throws {
        let fifo = scratch.url("key.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0, String(cString: strerror(errno)))
        let refusal = "read (not a regular file, pipe or character device) failed: Invalid argument (\(fifo))"
        try assertRejected(try Tools.mount(), [bundle, mountpoint, "--key-file", fifo],
                           containing: ["cannot read key file: \(refusal)"])
        try assertRejected(try Tools.pack(), [source, output, "--passphrase-file", fifo],
                           containing: ["cannot read passphrase file: \(refusal)"])
        try assertRejected(try Tools.inspect(), ["cat", bundle, "hello.txt", "--identity", fifo],
                           containing: ["cannot read identity file: \(refusal)"])
    }

    // MARK: - Damaged slots

    /// Copies `bundle` with the byte at `offset` (within slot `slot`'s
    /// body) XORed with `mask`.
    private func damagedCopy(of bundle: String, slot: Int, byte: Int, mask: UInt8 = 0x01, name: String) throws -> String {
        let slots = try BundleSurgery.slots(of: bundle)
        let body = slots[slot]
        precondition(byte < body.length, "internal error: byte \(byte) outside slot \(slot)")
        let copy = try scratch.write(name, Array(try XCTUnwrap(FileManager.default.contents(atPath: bundle))))
        try BundleSurgery.flipByte(at: body.offset + UInt64(byte), in: copy, mask: mask)
        return copy
    }

    func testDamagedX25519Slot_MountRefused() throws {
        let host = try XCTUnwrap(host)
        let single = scratch.url("x25519.encfs")
        assertSuccess(try pack(source, single, ["--recipient", host.recipient, "-q"]))
        XCTAssertEqual(try BundleSurgery.slots(of: single).map(\.kind), [3])
        // Body: fingerprint (8) ‖ ephemeral public key (32) ‖ wrapped key (48).
        let cases: [(byte: Int, fragments: [String])] = [
            (12, ["corrupted bundle header", "key slot 1 (x25519)"]),
            (39, ["corrupted bundle header", "key slot 1 (x25519)"]),
            (40, ["corrupted bundle header", "key slot 1 (x25519)"]),
            (87, ["corrupted bundle header", "key slot 1 (x25519)"]),
            (0, ["wrong key", "x25519"]),
        ]
        for (n, (byte, fragments)) in cases.enumerated() {
            let damaged = try damagedCopy(of: single, slot: 0, byte: byte, name: "x25519-\(n).encfs")
            try assertRejected(try Tools.mount(), [damaged, mountpoint, "--identity", host.key], containing: fragments + [damaged])
            try assertRejected(try Tools.inspect(), ["verify", damaged, "--identity", host.key], containing: fragments)
        }
        // Damage in the X25519 slot of a mixed bundle stops the raw key too:
        // the header MAC covers every slot.
        let mixedDamaged = try damagedCopy(of: bundle, slot: 1, byte: 50, name: "mixed-x25519.encfs")
        XCTAssertEqual(try BundleSurgery.slots(of: bundle).map(\.kind), [1, 3])
        try assertRejected(try Tools.mount(), [mixedDamaged, mountpoint, "--key-file", raw],
                           containing: ["bundle header failed authentication"])
    }

    func testDamagedRSASlot_MountRefused() throws {
        let rsa = try opensslRSA("rsa.pem")
        let single = scratch.url("rsa.encfs")
        assertSuccess(try pack(source, single, ["--recipient", rsa.recipient, "-q"]))
        XCTAssertEqual(try BundleSurgery.slots(of: single).map(\.kind), [4])
        // Body: fingerprint (8) ‖ RSA-OAEP ciphertext (256).
        let cases: [(byte: Int, fragments: [String])] = [
            (8, ["corrupted bundle header", "key slot 1 (rsa)"]),
            (100, ["corrupted bundle header", "key slot 1 (rsa)"]),
            (263, ["corrupted bundle header", "key slot 1 (rsa)"]),
            (7, ["wrong key", "rsa"]),
        ]
        for (n, (byte, fragments)) in cases.enumerated() {
            let damaged = try damagedCopy(of: single, slot: 0, byte: byte, name: "rsa-\(n).encfs")
            try assertRejected(try Tools.mount(), [damaged, mountpoint, "--identity", rsa.key], containing: fragments + [damaged])
            try assertRejected(try Tools.inspect(), ["cat", damaged, "hello.txt", "--identity", rsa.key], containing: fragments)
        }
    }

    func testDamagedPassphraseSlotParameters_MountRefused() throws {
        let passphrase = try makePassphraseFile()
        let single = scratch.url("passphrase.encfs")
        assertSuccess(try pack(source, single, ["--passphrase-file", passphrase, "--scrypt-log-n", "14", "-q"]))
        XCTAssertEqual(try BundleSurgery.slots(of: single).map(\.kind), [2])
        // Body: log2 N (1) ‖ reserved (3) ‖ r (u32) ‖ p (u32) ‖ salt (16) ‖ wrapped key (48).
        let cases: [(byte: Int, mask: UInt8, fragments: [String])] = [
            (0, 0x30, ["corrupted bundle header", "key slot 1 (passphrase)", "log2(N)"]),  // N = 2^62
            (1, 0x01, ["corrupted bundle header", "key slot 1 (passphrase)", "reserved"]),
            (4, 0x08, ["corrupted bundle header", "key slot 1 (passphrase)", "r = 0"]),     // r = 8 → 0
            (11, 0x80, ["corrupted bundle header", "key slot 1 (passphrase)"]),             // p = 2^31 + 1
            // Within the memory limit but hours (p = 2^20 + 1) or seconds
            // (p = 257) of scrypt: refused before scrypt runs.
            (10, 0x10, ["corrupted bundle header", "key slot 1 (passphrase)", "more work than a reader allows"]),
            (9, 0x01, ["corrupted bundle header", "key slot 1 (passphrase)", "more work than a reader allows"]),
            // An in-range change (N = 2^15) is bound by the wrap's associated
            // data: it fails like a wrong passphrase.
            (0, 0x01, ["wrong key", "passphrase"]),
            (20, 0x01, ["wrong key", "passphrase"]),
        ]
        for (n, (byte, mask, fragments)) in cases.enumerated() {
            let damaged = try damagedCopy(of: single, slot: 0, byte: byte, mask: mask, name: "passphrase-\(n).encfs")
            try assertRejected(try Tools.mount(), [damaged, mountpoint, "--passphrase-file", passphrase],
                               containing: fragments + [damaged])
        }
    }

    // MARK: - Usage

    func testUsageErrors_ExitTwo() throws {
        try assertRejected(try Tools.pack(), [source, output, "--recipient"], status: 2, containing: ["--recipient"])
        try assertRejected(try Tools.mount(), [bundle, mountpoint, "--identity"], status: 2, containing: ["--identity"])
        try assertRejected(try Tools.inspect(), ["rekey"], status: 2, containing: ["missing argument for rekey"])
        try assertRejected(try Tools.inspect(), ["frobnicate", bundle], status: 2, containing: ["unknown command frobnicate"])
        try assertRejected(try Tools.inspect(), ["rekey", bundle, "--key-file", raw, "--add-key-file", raw,
                                                 "--scrypt-log-n", "40"], status: 2, containing: ["--scrypt-log-n"])
    }
}
