import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// When a mount counts as ready, and what is left when its daemon dies:
/// the background command returns only once the mount serves; `-f` under
/// systemd (`NOTIFY_SOCKET`) reports READY=1 once it serves and STOPPING=1
/// at unmount; `-o auto_unmount` leaves no mount behind a killed daemon.
final class ReadinessTests: ToolTestCase {
    /// argv: socket name (a path, or `@name` for the abstract namespace).
    /// Binds a datagram socket, prints `bound`, then prints each datagram
    /// on one line (newlines as `|`) until one says STOPPING=1; gives up
    /// after 60 s.
    static let notifyListener = #"""
import socket, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name[1:] if name.startswith("@") else name)
print("bound", flush=True)
s.settimeout(60)
while True:
    data = s.recv(4096).decode()
    print(data.replace("\n", "|"), flush=True)
    if "STOPPING=1" in data.split("\n"):
        break
"""#

    private var bundle = ""
    private var key = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        _ = try scratch.write("src/ready.txt", Array("ready\n".utf8))
        key = try makeKeyFile()
        bundle = scratch.url("ready.encfs")
        try packOrThrow(source, bundle, keyFile: key)
    }

    func testBackground_ReturnsOnlyOnceServing() throws {
        let mountpoint = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        assertSuccess(try run(try Tools.mount(), [bundle, mountpoint, "--key-file", key], timeout: 60))
        // No polling: the mount must be in place and answering when the command returns.
        XCTAssertTrue(MountTable.isMounted(mountpoint))
        XCTAssertEqual(try String(contentsOfFile: "\(mountpoint)/ready.txt", encoding: .utf8), "ready\n")
    }

    func testForegroundNotify_PathSocket() throws {
        try checkNotifications(socketName: scratch.url("notify.sock"))
    }

    func testForegroundNotify_AbstractSocket() throws {
        try checkNotifications(socketName: "@encfs-test-notify-\(getpid())")
    }

    private func checkNotifications(socketName: String) throws {
        let listener = try SpawnedProcess(Tools.python, ["-c", Self.notifyListener, socketName])
        addTeardownBlock {
            listener.signal(SIGKILL)
            _ = listener.wait(deadline: Deadline(seconds: 5))
        }
        XCTAssertEqual(listener.readLine(deadline: Deadline(seconds: 15)), "bound")
        let mounted = try mount(bundle, at: nil, keyArguments: ["--key-file", key],
                                environment: ["NOTIFY_SOCKET": socketName], foreground: true)
        guard let ready = listener.readLine(deadline: Deadline(seconds: 15)) else { return XCTFail("no READY=1 datagram") }
        let readyFields = ready.split(separator: "|").map(String.init)
        XCTAssertTrue(readyFields.contains("READY=1"), ready)
        XCTAssertTrue(readyFields.contains("STATUS=serving \(mounted.mountpoint)"), ready)
        XCTAssertTrue(MountTable.isServing(mounted.mountpoint))
        unmount(mounted)
        guard let stopping = listener.readLine(deadline: Deadline(seconds: 15)) else { return XCTFail("no STOPPING=1 datagram") }
        XCTAssertTrue(stopping.split(separator: "|").contains("STOPPING=1"), stopping)
        XCTAssertEqual(listener.wait(deadline: Deadline(seconds: 10))?.code, 0)
        XCTAssertEqual(mounted.foreground?.wait(deadline: Deadline(seconds: 5))?.code, 0)
    }

    func testAutoUnmount_KilledDaemonLeavesNoMount() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["-o", "auto_unmount"])
        guard let daemon = mounted.daemonPID else { return XCTFail("no daemon serving \(mounted.mountpoint)") }
        XCTAssertEqual(kill(daemon, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 15) { !MountTable.isMounted(mounted.mountpoint) },
                      "a killed daemon left \(mounted.mountpoint) mounted")
    }

    /// The same after the mount was used: once a listing of the root was
    /// answered, a kernel allowed to skip opendir would open the dead
    /// mount's root without asking anyone, and fusermount3, which unmounts
    /// only when that open fails with ENOTCONN, kept the mount.
    func testAutoUnmount_KilledDaemonAfterUseLeavesNoMount() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["-o", "auto_unmount"])
        guard let daemon = mounted.daemonPID else { return XCTFail("no daemon serving \(mounted.mountpoint)") }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mounted.mountpoint), ["ready.txt"])
        XCTAssertEqual(try String(contentsOfFile: mounted.path("ready.txt"), encoding: .utf8), "ready\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mounted.mountpoint), ["ready.txt"])
        XCTAssertEqual(kill(daemon, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 15) { !MountTable.isMounted(mounted.mountpoint) },
                      "a killed daemon left \(mounted.mountpoint) mounted")
    }

    func testWithoutAutoUnmount_KilledDaemonLeavesDeadMount() throws {
        // Control: the same kill without auto_unmount leaves a dead mount,
        // so the test above sees auto_unmount at work, not a lucky race.
        let mounted = try mount(bundle, keyFile: key)
        guard let daemon = mounted.daemonPID else { return XCTFail("no daemon serving \(mounted.mountpoint)") }
        XCTAssertEqual(kill(daemon, SIGKILL), 0)
        XCTAssertTrue(Deadline.poll(seconds: 5) { !ProcessTable.isAlive(daemon) })
        XCTAssertTrue(MountTable.isMounted(mounted.mountpoint))
        XCTAssertFalse(MountTable.isServing(mounted.mountpoint))
    }
}
