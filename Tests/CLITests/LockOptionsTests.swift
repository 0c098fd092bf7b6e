import CryptCore
import EncFSCore
@testable import EncFSCLI
@testable import EncFSMountCLI
@testable import EncFSMount
@testable import EncFSService
import SharedTestSupport
import XCTest

/// The lock options of `encfs-mount`, the daemon's copy of them, the
/// unlock rate limit, the control protocol's secrets and the socket's paths.
final class LockOptionsTests: XCTestCase {
    private func settings(_ arguments: [String]) throws -> LockSettings {
        try LockOptions.settings(from: try MountCommand.parser.parse(["b", "m"].map { Array($0.utf8) } + arguments.map { Array($0.utf8) }))
    }

    func testDuration_UnitsAndBounds() {
        let cases: [(String, Int?)] = [("90s", 90), ("15m", 900), ("1h", 3600), ("7d", 604_800), ("1s", 1),
                                       ("0s", nil), ("8d", nil), ("15", nil), ("m", nil), ("-1m", nil), ("1.5h", nil),
                                       ("99999999999999999h", nil), ("", nil), ("1 m", nil)]
        for (text, expected) in cases {
            XCTAssertEqual(LockOptions.duration(Array(text.utf8)), expected, text)
        }
    }

    func testSettings_IdleLockImpliesComplete_UntilUnmountRefused() throws {
        XCTAssertEqual(try settings([]).protection, .untilUnmount)
        XCTAssertFalse(try settings([]).needsEveryOpen)
        let idle = try settings(["--idle-lock", "15m"])
        XCTAssertEqual(idle.protection, .complete)
        XCTAssertEqual(idle.idleLockSeconds, 900)
        XCTAssertTrue(idle.needsEveryOpen)
        XCTAssertEqual(try settings(["--idle-lock", "90s", "--protection", "unless-open"]).protection, .unlessOpen)
        XCTAssertThrowsError(try settings(["--idle-lock", "90s", "--protection", "until-unmount"])) { error in
            XCTAssertEqual((error as? UsageError)?.message, "--idle-lock cannot be used with --protection until-unmount")
        }
        XCTAssertTrue(try settings(["--start-locked"]).needsEveryOpen)
        XCTAssertThrowsError(try settings(["--start-locked", "--key-file", "k"])) { error in
            XCTAssertEqual((error as? UsageError)?.message, "--start-locked takes no key options: unlock with encfs-ctl MOUNTPOINT unlock")
        }
    }

    func testDaemonArguments_CarryTheLockSettings() throws {
        var configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        configuration.readaheadKB = getuid() == 0 ? MountCommand.defaultReadahead : nil
        configuration.lock.protection = .unlessOpen
        configuration.lock.idleLockSeconds = 5400
        configuration.lock.startsLocked = true
        configuration.lock.controlDirectory = Array("/run/user/1000/encfs".utf8)
        let argv = [Array(MountDaemon.flag.utf8)] + MountDaemonCommandLine.arguments(for: configuration)
        XCTAssertEqual(try MountDaemonCommandLine.settings(from: argv).configuration, configuration)
    }

    func testUnlockRateLimit_FiveFailuresAMinute() {
        var limit = UnlockRateLimit()
        for second in 0..<5 {
            XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 100 + second), 0)
            limit.recordFailure(now: 100 + second)
        }
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 105), 55)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 159), 1)
        // A minute after the first failure, one attempt is free again.
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 160), 0)
        limit.recordFailure(now: 160)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 160), 1)
    }

    /// Every secret of a failed request counts: three, then three more
    /// must wait until one of the first three is a minute old.
    func testUnlockRateLimit_CountsSecretsNotRequests() {
        var limit = UnlockRateLimit()
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 5, now: 100), 0)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 3, now: 100), 0)
        limit.recordFailure(secrets: 3, now: 100)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 2, now: 110), 0)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 3, now: 110), 50)
        limit.recordFailure(secrets: 2, now: 110)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 1, now: 120), 40)
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 4, now: 160), 10, "the three of 100 are gone, the two of 110 not yet")
        XCTAssertEqual(limit.waitBeforeAttempt(secrets: 3, now: 160), 0)
    }

    func testControlProtocol_SecretsRoundTrip_MalformedRefused() throws {
        let key = try SymmetricKey.random()
        let request = try ControlProtocol.unlockRequest([.rawKey(key), .passphrase(SecureBytes(copying: Array("pass word".utf8)))])
        let materials = try request.withUnsafeBytes { body in
            XCTAssertEqual(body.first, ControlProtocol.Request.unlock.rawValue)
            return try ControlProtocol.secrets(in: UnsafeRawBufferPointer(rebasing: body.dropFirst()))
        }
        XCTAssertEqual(materials.count, 2)
        guard case .rawKey(let parsed) = materials.first, case .passphrase(let passphrase) = materials.last else {
            return XCTFail("kinds changed: \(materials.map(\.kindName))")
        }
        XCTAssertTrue(parsed == key)
        XCTAssertEqual(passphrase.withUnsafeBytes { Array($0) }, Array("pass word".utf8))
        let malformed: [[UInt8]] = [[], [9, 0, 0, 0, 0], [2, 0, 0, 0, 5, 1], [2, 0, 0], [1, 0, 0, 0, 3, 1, 2, 3]]
        for bytes in malformed {
            XCTAssertThrowsError(try bytes.withUnsafeBytes { try ControlProtocol.secrets(in: $0) }, "\(bytes)")
        }
    }

    /// Root's sockets go to /run/encfs, a user's to $XDG_RUNTIME_DIR/encfs
    /// (none without it, or with a relative one); root's encfs-ctl also
    /// looks in the runtime directory it is given. The name depends only
    /// on the canonical mountpoint.
    func testControlSocket_DirectoriesAndNames() {
        let runtime = Array("/run/user/1000".utf8)
        XCTAssertEqual(ControlSocket.directory(uid: 0, runtimeDirectory: runtime), Array("/run/encfs".utf8))
        XCTAssertEqual(ControlSocket.directory(uid: 1000, runtimeDirectory: runtime), Array("/run/user/1000/encfs".utf8))
        XCTAssertNil(ControlSocket.directory(uid: 1000, runtimeDirectory: nil))
        XCTAssertNil(ControlSocket.directory(uid: 1000, runtimeDirectory: Array("run/user".utf8)))
        // Root's own directory must be root's; the runtime directory it is
        // given may be anyone's (whose daemon must then answer there).
        let forRoot = ControlSocket.directories(forClient: 0, runtimeDirectory: runtime)
        XCTAssertEqual(forRoot.map(\.path), [Array("/run/encfs".utf8), Array("/run/user/1000/encfs".utf8)])
        XCTAssertEqual(forRoot.map(\.owner), [0, nil])
        let forUser = ControlSocket.directories(forClient: 1000, runtimeDirectory: runtime)
        XCTAssertEqual(forUser.map(\.path), [Array("/run/user/1000/encfs".utf8)])
        XCTAssertEqual(forUser.map(\.owner), [1000])
        let one = ControlSocket.path(forMountpoint: Array("/srv/site".utf8), in: Array("/run/encfs".utf8))
        XCTAssertEqual(one, ControlSocket.path(forMountpoint: Array("/srv/site".utf8), in: Array("/run/encfs".utf8)))
        XCTAssertNotEqual(one, ControlSocket.path(forMountpoint: Array("/srv/site2".utf8), in: Array("/run/encfs".utf8)))
        // "/run/encfs/" + 32 hex digits + ".sock"
        XCTAssertEqual(one.count, 11 + 32 + 5)
        XCTAssertTrue(String(decoding: one, as: UTF8.self).hasSuffix(".sock"))
    }
}
