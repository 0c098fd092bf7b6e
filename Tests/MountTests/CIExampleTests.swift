import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The README's CI example end to end: `examples/ci/pack.sh` packs to the
/// hosts' recipients in a job that holds no secret (no `ENCFS_*` variable,
/// no terminal, stdin closed), and `examples/ci/mount.sh` mounts the bundle
/// on a host with its identity.
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

    /// Runs the CI step: `pack.sh RESOURCES BUNDLE RECIPIENT...` in a new
    /// session (no controlling terminal) with stdin closed.
    private func runPackStep(_ bundle: String, _ recipients: [String]) throws -> ProcessResult {
        try sh(#"exec setsid -w sh -c 'exec "$0" "$@" <&-' "$@""#, [script("pack.sh"), resources, bundle] + recipients,
               environment: binaryEnvironment)
    }

    /// Runs the host step, `mount.sh BUNDLE MOUNTPOINT IDENTITY`, and waits
    /// until the mount serves; the unmount is registered first.
    private func runMountStep(_ bundle: String, _ identity: String, at name: String) throws -> String {
        let mountpoint = try scratch.makeDirectory(name)
        addTeardownBlock {
            let notes = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil)
            if !notes.isEmpty { print("teardown: \(notes)") }
        }
        let mounted = try run(script("mount.sh"), [bundle, mountpoint, identity], environment: binaryEnvironment)
        guard mounted.status == 0 else { throw SubprocessError(mounted.summary) }
        XCTAssertTrue(Deadline.poll(seconds: 15) { MountTable.isMounted(mountpoint) && MountTable.isServing(mountpoint) },
                      "\(mountpoint) does not serve")
        return mountpoint
    }

    func testCIExample_PackWithRecipientsOnly_MountWithIdentity() throws {
        try scratch.makeDirectory("deploy")
        let host = try keygenIdentity("deploy/host.key")
        let laptop = try opensslRSA("deploy/laptop.pem")
        let bundle = scratch.url("app.bundle")

        let packed = try runPackStep(bundle, [host.recipient, laptop.recipient])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint),
                                           Slot(kind: "rsa", fingerprint: laptop.fingerprint)])

        for (n, identity) in [host.key, laptop.key].enumerated() {
            let mountpoint = try runMountStep(bundle, identity, at: "srv-\(n)/app")
            try assertSameTree(resources, mountpoint)
            XCTAssertEqual(MountedBundle.unmount(mountpoint: mountpoint, foreground: nil), [])
        }
    }

    func testCIExample_RecipientPathsWithSpaces() throws {
        try scratch.makeDirectory("deploy keys")
        let host = try keygenIdentity("deploy keys/host key")
        let bundle = scratch.url("app bundle")
        let packed = try runPackStep(bundle, [host.recipient])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint)])
        let mountpoint = try runMountStep(bundle, host.key, at: "srv dir/app")
        try assertSameTree(resources, mountpoint)
    }

    func testCIExample_PackWithoutRecipient_FailsWithoutPrompting() throws {
        let bundle = scratch.url("app.bundle")
        let packed = try runPackStep(bundle, [])
        XCTAssertEqual(packed.status, 1, packed.summary)
        XCTAssertTrue(packed.errorOutput.contains("no key given"), packed.errorOutput)
        XCTAssertFalse(FileManager.default.fileExists(atPath: bundle))
    }
}
