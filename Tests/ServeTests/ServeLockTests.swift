import CryptCore
import EncFSCore
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's lock options with encfs-ctl, through the real binaries:
/// `--name NAME` makes a control socket in the mount's hardened directory;
/// a lock answers 503 and wipes the keys, an unlock serves again;
/// `--idle-lock`, `--start-locked`, `--protection until-unmount`; status
/// counts requests; another user is refused by the socket's peer check.
final class ServeLockTests: ServeTestCase {
    var source = ""
    var key = ""
    var bundle = ""
    /// A name no other test or machine user uses.
    var serverName = ""
    /// The control socket directory: /run/encfs for root, a 0700
    /// XDG_RUNTIME_DIR/encfs in the scratch directory otherwise.
    var environment: [String: String]?

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = work + "/src"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try "<html><body>locked away</body></html>\n".write(toFile: source + "/index.html", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: source + "/big.bin", contents: Data((0..<300_000).map { _ in UInt8.random(in: 0...255) }))
        key = try makeKey()
        bundle = try pack(source, key: key)
        serverName = "t-" + randomHex(bytes: 8)
        if getuid() != 0 {
            let runtime = work + "/run"
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            environment = ["XDG_RUNTIME_DIR": runtime]
        }
    }

    private var controlDirectory: String { environment.map { $0["XDG_RUNTIME_DIR"]! + "/encfs" } ?? "/run/encfs" }

    private func ctl(_ arguments: [String]) throws -> Result {
        try execute(tool("encfs-ctl"), arguments, environment: environment)
    }

    /// `encfs-ctl --name NAME status --json` as a dictionary.
    private func status() throws -> [String: Any] {
        let result = try ctl(["--name", serverName, "status", "--json"])
        XCTAssertEqual(result.status, 0, result.errorText)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: result.output) as? [String: Any], result.text)
    }

    private func get(_ server: Server, _ path: String) throws -> Int {
        try curl(server.url + path).status
    }

    /// The keys of `bundle` and of its `file`, by name.
    private func keyNeedles(of bundle: String? = nil, file: String = "big.bin") throws -> [String: [UInt8]] {
        let keyFile = try KeyFiles.readKeyFile(Array(key.utf8))
        let reader = try BundleReader.open(path: Array((bundle ?? self.bundle).utf8), materials: [.rawKey(keyFile)])
        let big = try reader.index.resolve(path: Array(file.utf8))
        func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
        return ["content": bytes(reader.keys.contentKey), "index": bytes(reader.keys.indexKey),
                "file": bytes(try reader.fileKey(for: big)), "key_file": bytes(keyFile)]
    }

    func testLock_503AndKeysWiped_UnlockServesAgain() throws {
        let server = try serve([bundle, "--key-file", key, "--name", serverName, "--protection", "complete"], environment: environment)
        XCTAssertEqual(try get(server, "index.html"), 200)
        XCTAssertEqual(try get(server, "big.bin"), 200)
        let needles = getuid() == 0 ? try keyNeedles() : [:]
        if getuid() == 0 {
            // The control: the search finds the keys while unlocked.
            let before = try namesFound(inMemoryOf: server.pid, needles)
            XCTAssertTrue(before.contains("content"), "the search does not find the content key while unlocked: \(before)")
        }
        let locked = try ctl(["--name", serverName, "lock"])
        XCTAssertEqual(locked.status, 0, locked.errorText)
        XCTAssertEqual(locked.text, "locked\n")
        let refused = try curl(server.url + "index.html")
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.body.count, 0, "a locked server gives no hint")
        XCTAssertEqual(try curl(server.origin + "/not-the-token/index.html").status, 404, "the token is checked before the lock")
        if getuid() == 0 {
            XCTAssertEqual(try namesFound(inMemoryOf: server.pid, needles), [], "keys left in encfs-serve's memory after lock")
        }
        var now = try status()
        XCTAssertEqual(now["locked"] as? Bool, true)
        XCTAssertEqual(now["state"] as? String, "locked")
        XCTAssertEqual(now["protection"] as? String, "complete")
        XCTAssertEqual(now["requests_served"] as? Int, 4)
        XCTAssertEqual(now["listen"] as? [String], [String(server.origin.dropFirst("http://".count))])

        let unlocked = try ctl(["--name", serverName, "unlock", "--key-file", key])
        XCTAssertEqual(unlocked.status, 0, unlocked.errorText)
        let body = try curl(server.url + "index.html")
        XCTAssertEqual(body.status, 200)
        XCTAssertEqual(String(decoding: body.body, as: UTF8.self), "<html><body>locked away</body></html>\n")
        now = try status()
        XCTAssertEqual(now["locked"] as? Bool, false)
        XCTAssertEqual(now["requests_served"] as? Int, 5)
        XCTAssertEqual(server.stop(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: controlDirectory + "/serve-\(serverName).sock"), "the socket outlived the server")
    }

    /// A body being sent when the lock comes: cut short under `complete`
    /// (its key is wiped at once, however slowly the client reads), sent
    /// whole under `unless-open`, and then its keys go too.
    func testLock_BodyInFlight_CutUnderComplete_FinishesUnderUnlessOpen() throws {
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        let large = Array(random.readData(ofLength: 24 << 20))
        try random.close()
        try FileManager.default.createDirectory(atPath: work + "/src2", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: work + "/src2/large.bin", contents: Data(large))
        let bundle2 = try pack(work + "/src2", key: key, name: "large.encfs")
        for (protection, whole) in [("complete", false), ("unless-open", true)] {
            let server = try serve([bundle2, "--key-file", key, "--name", serverName, "--protection", protection], environment: environment)
            let body = work + "/body-\(protection)"
            let reading = Process()
            reading.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            reading.arguments = ["-s", "--limit-rate", "4M", "-o", body, server.url + "large.bin"]
            try reading.run()
            defer { if reading.isRunning { reading.terminate() } }
            let started = Date().addingTimeInterval(60)
            while (try? FileManager.default.attributesOfItem(atPath: body)[.size] as? Int) ?? 0 < 1 << 20, Date() < started {
                usleep(20_000)
            }
            XCTAssertEqual(try ctl(["--name", serverName, "lock"]).status, 0)
            reading.waitUntilExit()
            let got = Array(FileManager.default.contents(atPath: body) ?? Data())
            if whole {
                XCTAssertEqual(reading.terminationStatus, 0, protection)
                XCTAssertTrue(got == large, "\(protection): the body in flight was not sent whole (\(got.count) bytes)")
            } else {
                XCTAssertNotEqual(reading.terminationStatus, 0, "\(protection): the body in flight was not cut")
                XCTAssertLessThan(got.count, large.count, protection)
                XCTAssertTrue(got.elementsEqual(large.prefix(got.count)), "\(protection): a wrong byte before the cut")
            }
            if getuid() == 0 {
                XCTAssertEqual(try namesFound(inMemoryOf: server.pid, try keyNeedles(of: bundle2, file: "large.bin")), [],
                               "\(protection): keys left after the lock and the body's end")
            }
            XCTAssertEqual(try get(server, "large.bin"), 503)
            XCTAssertEqual(server.stop(), 0)
        }
    }

    func testStatus_ByControlSocketPath_TextAndRefusals() throws {
        let server = try serve([bundle, "--key-file", key, "--name", serverName], environment: environment)
        XCTAssertEqual(try get(server, "index.html"), 200)
        let socket = controlDirectory + "/serve-\(serverName).sock"
        let text = try ctl([socket, "status"])
        XCTAssertEqual(text.status, 0, text.errorText)
        XCTAssertTrue(text.text.contains("server:          \(serverName)\n"), text.text)
        XCTAssertTrue(text.text.contains("state:           unlocked\n"), text.text)
        XCTAssertTrue(text.text.contains("requests served: 1\n"), text.text)
        // until-unmount (the default): a lock needs --force.
        let plain = try ctl(["--name", serverName, "lock"])
        XCTAssertEqual(plain.status, 1)
        XCTAssertEqual(plain.errorLines.first,
                       "encfs-ctl: error: the server's protection is until-unmount: lock it with --force, or start it with --protection complete")
        XCTAssertEqual(plain.errorLines.dropFirst().first, "hint: encfs-ctl --name NAME lock --force")
        let log = try ctl(["--name", serverName, "access-log", "--json"])
        XCTAssertEqual(log.status, 0, log.errorText)
        let logObject = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(log.text.utf8)) as? [String: Any])
        XCTAssertEqual(logObject["name"] as? String, serverName)
        XCTAssertNil(logObject["mountpoint"])
        XCTAssertEqual(try get(server, "index.html"), 200)
        XCTAssertEqual(try ctl([socket, "lock", "--force"]).status, 0)
        XCTAssertEqual(try get(server, "index.html"), 503)
        // A socket outside the control directory is never spoken to.
        let planted = work + "/serve-\(serverName).sock"
        let fake = try execute("/usr/bin/python3", ["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])", planted])
        XCTAssertEqual(fake.status, 0, fake.errorText)
        let refused = try ctl([planted, "status"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.errorText.contains("not in a control socket directory"), refused.errorText)
        XCTAssertEqual(try ctl(["--name", "no-such-" + serverName, "status"]).status, 1)
    }

    func testStartLocked_NothingServedUntilUnlock() throws {
        let server = try serve([bundle, "--name", serverName, "--start-locked"], environment: environment)
        XCTAssertEqual(try get(server, "index.html"), 503)
        XCTAssertEqual(try status()["locked"] as? Bool, true)
        let wrong = work + "/wrong"
        try (String(repeating: "ab", count: 32) + "\n").write(toFile: wrong, atomically: true, encoding: .utf8)
        XCTAssertEqual(try ctl(["--name", serverName, "unlock", "--key-file", wrong]).status, 1, "a wrong key leaves it locked")
        XCTAssertEqual(try get(server, "index.html"), 503)
        XCTAssertEqual(try ctl(["--name", serverName, "unlock", "--key-file", key]).status, 0)
        XCTAssertEqual(try get(server, "index.html"), 200)
    }

    func testIdleLock_LocksAfterNoRequests() throws {
        let server = try serve([bundle, "--key-file", key, "--name", serverName, "--idle-lock", "2s"], environment: environment)
        XCTAssertEqual(try get(server, "index.html"), 200)
        XCTAssertEqual(try status()["protection"] as? String, "complete", "--idle-lock implies complete")
        // Polled, with a generous deadline: the assertion is that it
        // locks, not how fast.
        let deadline = Date().addingTimeInterval(60)
        while try status()["locked"] as? Bool != true, Date() < deadline { usleep(200_000) }
        XCTAssertEqual(try status()["locked"] as? Bool, true)
        XCTAssertEqual(try status()["idle_lock_seconds"] as? Int, 2)
        XCTAssertEqual(try get(server, "index.html"), 503)
    }

    func testRefusals_LockOptionsNeedName_NameChecked() throws {
        for (arguments, message) in [
            (["--protection", "complete"], "encfs-serve: error: --protection, --idle-lock and --start-locked need --name NAME (encfs-ctl --name NAME unlocks the server)"),
            (["--name", "../x"], "encfs-serve: error: --name must be 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . or -)"),
            (["--name", serverName, "--start-locked", "--key-file", key], "encfs-serve: error: --start-locked takes no key options: unlock with encfs-ctl MOUNTPOINT unlock"),
        ] {
            let result = try execute(tool("encfs-serve"), [bundle] + arguments, environment: environment)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertEqual(result.errorLines.first, message, "\(arguments)")
        }
    }

    func testControlSocket_OtherUserRefused() throws {
        guard getuid() == 0 else { throw XCTSkip("setpriv needs root") }
        let server = try serve([bundle, "--key-file", key, "--name", serverName, "--protection", "complete"])
        let socket = controlDirectory + "/serve-\(serverName).sock"
        // The 0700 directory stops another user first…
        let asNobody = try execute("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", tool("encfs-ctl"),
                                                        "--name", serverName, "lock"], environment: ["XDG_RUNTIME_DIR": "/nonexistent"])
        XCTAssertEqual(asNobody.status, 1, asNobody.errorText)
        // …and with the socket opened up and reached without searching the
        // directory (a descriptor passed down), the server's own peer check
        // (SO_PEERCRED) refuses the lock.
        XCTAssertEqual(chmod(socket, 0o666), 0)
        let script = """
            import os, subprocess, sys
            fd = os.open(sys.argv[1], os.O_PATH)
            lock = ("import socket, struct, sys\\n"
                    "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\\n"
                    "s.sendall(struct.pack('>I', 1) + bytes([3]))\\n"
                    "n = struct.unpack('>I', s.recv(4))[0]; body = b''\\n"
                    "while len(body) < n: body += s.recv(n - len(body))\\n"
                    "print('reply', body[0], body[1:].decode())\\n")
            other = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', sys.executable, '-c', lock, '/proc/self/fd/%d' % fd]
            print(subprocess.run(other, pass_fds=[fd], capture_output=True, text=True).stdout, end='')
            """
        let refused = try execute("/usr/bin/python3", ["-c", script, socket])
        XCTAssertEqual(refused.text, "reply 96 permission denied: only the user who started it, or root, may control this server\n")
        XCTAssertEqual(try get(server, "index.html"), 200, "still unlocked")
    }
}
