import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// An fstab line mounts a bundle through mount(8) and Debian's
/// `mount.fuse3`, which runs `encfs-mount BUNDLE MNT -o OPTIONS` found on
/// its own PATH and adds `rw,dev,suid` (and whatever the line says).
final class FstabTests: ToolTestCase {
    private var bundle = ""
    private var key = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        _ = try scratch.write("src/hello.txt", Array("hello from fstab\n".utf8))
        key = try makeKeyFile()
        bundle = scratch.url("assets.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        try linkIntoSystemPath("encfs-mount", target: try Tools.mount())
    }

    /// Registers the fallback unmount before anything is mounted.
    private func mountpointCleanedUpAtTeardown(_ name: String) throws -> String {
        let mountpoint = try scratch.makeDirectory(name)
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        return mountpoint
    }

    func testFstabLine_MountAllReadUmountLeavesNothing() throws {
        let mountpoint = try mountpointCleanedUpAtTeardown("mnt")
        // No `ro`: mount.fuse3 adds rw, which must be accepted and ignored.
        let line = "\(bundle) \(mountpoint) fuse.encfs-mount keyfile=\(key),index_cache=512,nofail,_netdev,x-systemd.device-timeout=5,comment=assets 0 0\n"
        let fstab = try scratch.write("fstab", Array(line.utf8))
        // A bare PATH without /usr/local/bin: mount(8) looks the helper up itself.
        assertSuccess(try run("/usr/bin/mount", ["-a", "-T", fstab], environment: ["PATH": "/usr/bin:/bin"], timeout: 60))
        XCTAssertTrue(MountTable.isServing(mountpoint))
        XCTAssertEqual(try String(contentsOfFile: "\(mountpoint)/hello.txt", encoding: .utf8), "hello from fstab\n")
        let entry = MountTable.entry(at: mountpoint)
        XCTAssertEqual(entry?.type, "fuse.encfs")
        XCTAssertTrue(entry?.mountOptions.contains("ro") ?? false, "\(String(describing: entry))")
        XCTAssertTrue(entry?.mountOptions.contains("nosuid") ?? false)
        XCTAssertTrue(entry?.mountOptions.contains("nodev") ?? false)
        XCTAssertFalse(MountTable.entries().contains { $0.superOptions.contains { $0.contains(key) } })
        assertSuccess(try run("/usr/bin/umount", [mountpoint], timeout: 30))
        let findmnt = try run("/usr/bin/findmnt", [mountpoint])
        XCTAssertEqual(findmnt.status, 1, findmnt.summary)
        XCTAssertEqual(findmnt.stdout, [])
    }

    func testMountT_WithNoexecAppliesIt() throws {
        let mountpoint = try mountpointCleanedUpAtTeardown("mnt-t")
        assertSuccess(try run("/usr/bin/mount", ["-t", "fuse.encfs-mount", bundle, mountpoint, "-o", "keyfile=\(key),noexec,rw"],
                              environment: ["PATH": "/usr/bin:/bin"], timeout: 60))
        XCTAssertTrue(MountTable.entry(at: mountpoint)?.mountOptions.contains("noexec") ?? false)
        XCTAssertTrue(MountTable.entry(at: mountpoint)?.mountOptions.contains("ro") ?? false)
        XCTAssertEqual(try String(contentsOfFile: "\(mountpoint)/hello.txt", encoding: .utf8), "hello from fstab\n")
        assertSuccess(try run("/usr/bin/umount", [mountpoint], timeout: 30))
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    func testSecretInOptions_IsRefusedAndNotEchoed() throws {
        let mountpoint = try mountpointCleanedUpAtTeardown("mnt-secret")
        let result = try run("/usr/bin/mount", ["-t", "fuse.encfs-mount", bundle, mountpoint, "-o", "passphrase=hunter2-secret"],
                             environment: ["PATH": "/usr/bin:/bin"], timeout: 60)
        XCTAssertNotEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.errorOutput.contains("encfs-mount: error: option -o passphrase= is refused"), result.summary)
        XCTAssertFalse(result.errorOutput.contains("hunter2"), result.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }
}
