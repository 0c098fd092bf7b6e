import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Round trips through every kind of key slot, alone and mixed in one
/// bundle: X25519 recipients made by `encfs-keygen` and by the `openssl`
/// command line, an RSA-2048 recipient made by `openssl`, a raw key and a
/// passphrase. Each secret opens the bundle through `encfs-mount` (options
/// and `ENCFS_IDENTITY`) and `encfs-inspect cat`; packing to recipients
/// alone needs no secret, no terminal and no stdin.
final class RecipientTests: KeyTestCase {
    private var source = ""
    private var data: [UInt8] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        data = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 251) }
        try scratch.write("src/hello.txt", Array("hello, recipients\n".utf8))
        try scratch.makeDirectory("src/sub")
        try scratch.write("src/sub/data.bin", data)
        try scratch.write("src/empty", [])
        guard symlink("../hello.txt", scratch.url("src/sub/link")) == 0 else { throw SubprocessError("symlink") }
    }

    /// One secret of every kind.
    private struct Secrets {
        let keygen: Identity
        let openssl: Identity
        let rsa: Identity
        let rawKey: String
        let passphrase: String

        /// Each secret as key arguments and environment, with a label.
        var all: [(label: String, arguments: [String], environment: [String: String?])] {
            [("encfs-keygen identity", ["--identity", keygen.key], [:]),
             ("openssl X25519 identity", ["--identity", openssl.key], [:]),
             ("openssl RSA identity", ["--identity", rsa.key], [:]),
             ("key file", ["--key-file", rawKey], [:]),
             ("passphrase file", ["--passphrase-file", passphrase], [:]),
             ("ENCFS_IDENTITY (X25519)", [], ["ENCFS_IDENTITY": keygen.key]),
             ("ENCFS_IDENTITY (RSA)", [], ["ENCFS_IDENTITY": rsa.key])]
        }
    }

    private func makeSecrets() throws -> Secrets {
        Secrets(keygen: try keygenIdentity("host.key"), openssl: try opensslX25519("ossl-x25519.pem"),
                rsa: try opensslRSA("rsa.pem"), rawKey: try makeRawKey(), passphrase: try makePassphraseFile())
    }

    /// Packs with all five secrets, options interleaved.
    private func packMixed(_ secrets: Secrets) throws -> String {
        let bundle = scratch.url("mixed.encfs")
        assertSuccess(try pack(source, bundle, [
            "--recipient", secrets.keygen.recipient, "--key-file", secrets.rawKey,
            "--recipient", secrets.openssl.recipient, "--passphrase-file", secrets.passphrase, "--scrypt-log-n", "14",
            "--recipient", secrets.rsa.recipient, "-q",
        ]))
        return bundle
    }

    func testPack_MixedSlots_ListsEveryKindAndRecipientFingerprint() throws {
        let secrets = try makeSecrets()
        let bundle = try packMixed(secrets)
        let slots = try slots(bundle)
        XCTAssertEqual(slots.map(\.kind).sorted(), ["passphrase", "raw-key", "rsa", "x25519", "x25519"], "\(slots)")
        let recipients = Set(slots.filter { $0.kind == "x25519" || $0.kind == "rsa" }.map(\.description))
        XCTAssertEqual(recipients, ["x25519 \(secrets.keygen.fingerprint)", "x25519 \(secrets.openssl.fingerprint)",
                                    "rsa \(secrets.rsa.fingerprint)"])
        for slot in slots {
            XCTAssertNotNil(slot.fingerprint.wholeMatch(of: /[0-9a-f]{16}/), "\(slot)")
        }
    }

    func testMount_MixedSlots_OpensWithEachSecret() throws {
        let secrets = try makeSecrets()
        let bundle = try packMixed(secrets)
        for (label, arguments, environment) in secrets.all {
            let mounted = try mount(bundle, keyArguments: arguments, environment: environment)
            try assertSameTree(source, mounted.mountpoint, label)
            unmount(mounted)
        }
    }

    func testInspectCat_MixedSlots_OpensWithEachSecret() throws {
        let secrets = try makeSecrets()
        let bundle = try packMixed(secrets)
        for (label, arguments, environment) in secrets.all {
            let cat = try inspect(["cat", bundle, "sub/data.bin"] + arguments, environment: environment)
            XCTAssertEqual(cat.status, 0, "\(label): \(cat.summary)")
            XCTAssertTrue(cat.stdout == data, "\(label): \(cat.stdout.count) bytes differ from the source")
            let link = try inspect(["cat", bundle, "sub/link"] + arguments, environment: environment)
            XCTAssertEqual(link.output, "hello, recipients\n", "\(label): \(link.summary)")
        }
    }

    func testRoundTrip_EachSlotKindAlone() throws {
        let secrets = try makeSecrets()
        let cases: [(kind: String, packArguments: [String], openArguments: [String])] = [
            ("x25519", ["--recipient", secrets.keygen.recipient], ["--identity", secrets.keygen.key]),
            ("x25519", ["--recipient", secrets.openssl.recipient], ["--identity", secrets.openssl.key]),
            ("rsa", ["--recipient", secrets.rsa.recipient], ["--identity", secrets.rsa.key]),
            ("raw-key", ["--key-file", secrets.rawKey], ["--key-file", secrets.rawKey]),
            ("passphrase", ["--passphrase-file", secrets.passphrase, "--scrypt-log-n", "14"],
             ["--passphrase-file", secrets.passphrase]),
        ]
        for (n, (kind, packArguments, openArguments)) in cases.enumerated() {
            let bundle = scratch.url("single-\(n).encfs")
            assertSuccess(try pack(source, bundle, packArguments + ["-q"]), kind)
            XCTAssertEqual(try slots(bundle).map(\.kind), [kind])
            let mounted = try mount(bundle, keyArguments: openArguments)
            try assertSameTree(source, mounted.mountpoint, kind)
            unmount(mounted)
            let verify = try inspect(["verify", bundle] + openArguments)
            XCTAssertEqual(verify.status, 0, "\(kind): \(verify.summary)")
        }
    }

    func testPack_RecipientsOnly_NeedNoSecretNoTerminalNoStdin() throws {
        let host = try keygenIdentity("host.key")
        let rsa = try opensslRSA("rsa.pem")
        let bundle = scratch.url("ci.encfs")
        // A new session has no controlling terminal; stdin is closed; the
        // environment has no ENCFS_* variable (Subprocess removes them).
        let detached = #"exec setsid -w sh -c 'exec "$0" "$@" <&-' "$@""#
        let packed = try sh(detached, [try Tools.pack(), source, bundle, "--recipient", host.recipient,
                                       "--recipient", rsa.recipient, "-q"])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(packed.stderr, [], packed.errorOutput)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint),
                                           Slot(kind: "rsa", fingerprint: rsa.fingerprint)])
        let mounted = try mount(bundle, keyArguments: ["--identity", rsa.key])
        try assertSameTree(source, mounted.mountpoint)

        // The same conditions without a recipient: no secret, so no bundle.
        let none = scratch.url("none.encfs")
        let refused = try sh(detached, [try Tools.pack(), source, none, "-q"])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertEqual(refused.errorLines.count, 1, refused.errorOutput)
        XCTAssertTrue(refused.errorOutput.contains("no key given"), refused.errorOutput)
        XCTAssertFalse(FileManager.default.fileExists(atPath: none))
    }

    func testMount_SeveralSecrets_AnyOneThatOpensIsEnough() throws {
        let host = try keygenIdentity("host.key")
        let other = try keygenIdentity("other.key")
        let rsa = try opensslRSA("rsa.pem")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", rsa.recipient, "--recipient", host.recipient, "-q"]))
        let wrongKey = try makeRawKey("wrong.key")
        let mounted = try mount(bundle, keyArguments: ["--identity", other.key, "--key-file", wrongKey,
                                                       "--identity", host.key])
        try assertSameTree(source, mounted.mountpoint)
        unmount(mounted)
        let cat = try inspect(["cat", bundle, "hello.txt", "--identity", other.key, "--identity", rsa.key])
        XCTAssertEqual(cat.output, "hello, recipients\n", cat.summary)
    }

    func testPack_IdentityOption_AddsItsRecipientSlot() throws {
        let host = try keygenIdentity("host.key")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--identity", host.key, "-q"]))
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint)])
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_IDENTITY": host.key])
        try assertSameTree(source, mounted.mountpoint)
    }
}
