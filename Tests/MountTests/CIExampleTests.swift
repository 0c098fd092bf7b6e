import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The README's CI example end to end: `examples/ci/pack.sh` packs to the
/// hosts' recipients and signs with the CI's signing key, in a job that
/// holds no secret that decrypts (no `ENCFS_*` variable, no terminal, stdin
/// closed), and `examples/ci/mount.sh` mounts the bundle on a host with its
/// identity, refusing any bundle the CI's key did not sign.
final class CIExampleTests: KeyTestCase {
    private var resources = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        resources = try scratch.makeDirectory("resources")
        try scratch.write("resources/index.html", Array("<h1>app</h1>\n".utf8))
        try scratch.makeDirectory("resources/media")
        try scratch.write("resources/media/clip.bin", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        guard symlink("media/clip.bin", scratch.url("resources/latest")) == 0 else { throw SubprocessError("symlink") }
    }

    private func script(_ name: String) -> String { "\(Tools.repositoryRoot)/examples/ci/\(name)" }

    private var binaryEnvironment: [String: String?] { ["ENCFS_BIN": Tools.binaryDirectory] }

    /// The CI's signing key, made once (`encfs-keygen --sign`): the key is
    /// a CI secret, its `.pub` goes to the hosts.
    private func makeSigningKey(_ name: String) throws -> (key: String, pub: String) {
        let key = scratch.url(name)
        try check(try Tools.keygen(), ["--sign", "-o", key])
        try registerSecretFile(key)
        return (key, key + ".pub")
    }

    /// Runs the CI step: `pack.sh RESOURCES BUNDLE SIGNING_KEY RECIPIENT...`
    /// in a new session (no controlling terminal) with stdin closed.
    private func runPackStep(_ bundle: String, signingKey: String, _ recipients: [String]) throws -> ProcessResult {
        try sh(#"exec setsid -w sh -c 'exec "$0" "$@" <&-' "$@""#, [script("pack.sh"), resources, bundle, signingKey] + recipients,
               environment: binaryEnvironment)
    }

    /// Runs the host step, `mount.sh BUNDLE MOUNTPOINT IDENTITY VERIFY_KEY`.
    private func runMountScript(_ bundle: String, _ identity: String, _ verifyKey: String, at mountpoint: String) throws -> ProcessResult {
        addTeardownBlock {
            let notes = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil)
            if !notes.isEmpty { print("teardown: \(notes)") }
        }
        return try run(script("mount.sh"), [bundle, mountpoint, identity, verifyKey], environment: binaryEnvironment)
    }

    /// Runs the host step and waits until the mount serves; the unmount is
    /// registered first.
    private func runMountStep(_ bundle: String, _ identity: String, _ verifyKey: String, at name: String) throws -> String {
        let mountpoint = try scratch.makeDirectory(name)
        let mounted = try runMountScript(bundle, identity, verifyKey, at: mountpoint)
        guard mounted.status == 0 else { throw SubprocessError(mounted.summary) }
        XCTAssertTrue(Deadline.poll(seconds: 15) { MountTable.isMounted(mountpoint) && MountTable.isServing(mountpoint) },
                      "\(mountpoint) does not serve")
        return mountpoint
    }

    func testCIExample_PackWithRecipientsOnly_MountWithIdentity() throws {
        try scratch.makeDirectory("deploy")
        let host = try keygenIdentity("deploy/host.key")
        let laptop = try opensslRSA("deploy/laptop.pem")
        let ci = try makeSigningKey("ci.sign")
        let bundle = scratch.url("app.bundle")

        let packed = try runPackStep(bundle, signingKey: ci.key, [host.recipient, laptop.recipient])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint),
                                           Slot(kind: "rsa", fingerprint: laptop.fingerprint)])
        XCTAssertNotNil(try info(bundle, ["--verify-key", ci.pub])["signature"] as? [String: Any])

        for (n, identity) in [host.key, laptop.key].enumerated() {
            let mountpoint = try runMountStep(bundle, identity, ci.pub, at: "srv-\(n)/app")
            try assertSameTree(resources, mountpoint)
            XCTAssertEqual(MountedBundle.unmount(mountpoint: mountpoint, foreground: nil), [])
        }
    }

    /// Someone who has the host's public key (it is committed) packs a
    /// bundle for it, unsigned or signed with a key of their own: the
    /// host's mount step refuses both and mounts nothing.
    func testCIExample_BundleForgedWithTheHostsPublicKey_Refused() throws {
        try scratch.makeDirectory("deploy")
        let host = try keygenIdentity("deploy/host.key")
        let ci = try makeSigningKey("ci.sign")
        let attacker = try makeSigningKey("attacker.sign")
        let unsigned = scratch.url("unsigned.bundle")
        try check(try Tools.pack(), [resources, unsigned, "--recipient", host.recipient, "-q"])
        let selfSigned = scratch.url("self-signed.bundle")
        XCTAssertEqual(try runPackStep(selfSigned, signingKey: attacker.key, [host.recipient]).status, 0)
        for (bundle, message) in [(unsigned, "bundle is not signed"),
                                  (selfSigned, "bundle is signed by a key not given with --verify-key")] {
            let mountpoint = try scratch.makeDirectory(uniqueName("srv"))
            let result = try runMountScript(bundle, host.key, ci.pub, at: mountpoint)
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-mount: error: \(message)") ?? false, result.errorOutput)
            XCTAssertFalse(MountTable.isMounted(mountpoint))
        }
    }

    func testCIExample_RecipientPathsWithSpaces() throws {
        try scratch.makeDirectory("deploy keys")
        let host = try keygenIdentity("deploy keys/host key")
        let ci = try makeSigningKey("ci sign key")
        let bundle = scratch.url("app bundle")
        let packed = try runPackStep(bundle, signingKey: ci.key, [host.recipient])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint)])
        let mountpoint = try runMountStep(bundle, host.key, ci.pub, at: "srv dir/app")
        try assertSameTree(resources, mountpoint)
    }

    func testCIExample_PackWithoutRecipient_FailsWithoutPrompting() throws {
        let ci = try makeSigningKey("ci.sign")
        let bundle = scratch.url("app.bundle")
        let packed = try runPackStep(bundle, signingKey: ci.key, [])
        XCTAssertEqual(packed.status, 1, packed.summary)
        XCTAssertTrue(packed.errorOutput.contains("no key given"), packed.errorOutput)
        XCTAssertFalse(FileManager.default.fileExists(atPath: bundle))
    }
}
