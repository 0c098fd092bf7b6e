import CryptCore
import EncFSCore
@testable import EncFSCLI
@testable import EncFSMountCLI
import EncFSMount
import SharedTestSupport
import XCTest

/// The daemon's argv carries every serving setting: what the command
/// parsed, written by `daemonArguments`, parses back to the same thing.
final class MountCommandTests: XCTestCase {
    private func roundTrip(_ configuration: MountConfiguration) throws -> MountConfiguration {
        let argv = [Array(MountDaemon.flag.utf8)] + MountDaemonCommandLine.arguments(for: configuration)
        XCTAssertTrue(MountDaemonCommandLine.isDaemon(argv))
        let settings = try MountDaemonCommandLine.settings(from: argv)
        XCTAssertNil(settings.remote)
        return settings.configuration
    }

    func testDaemonArguments_RoundTripEverySetting() throws {
        var configuration = MountConfiguration(bundlePath: Array("/srv/a b,c.encfs".utf8), mountpoint: Array("/mnt/-x".utf8),
                                               indexCacheKB: 128, threads: 7)
        configuration.fuseOptions = ["allow_other", "uid=5"]
        configuration.logFile = Array("/var/log/encfs \u{1b}.log".utf8)
        configuration.readaheadKB = 2048
        configuration.logNames = true
        configuration.allowsExternalSymlinks = true
        configuration.pollMicroseconds = 120
        configuration.pollMicrosecondsGiven = true
        XCTAssertEqual(try roundTrip(configuration), configuration)
        configuration.pollMicroseconds = 0
        XCTAssertEqual(try roundTrip(configuration), configuration)
        for choice in TransportChoice.allCases {
            configuration.transport = .required(choice)
            XCTAssertEqual(try roundTrip(configuration), configuration)
        }
    }

    func testDaemonArguments_RoundTripDefaults() throws {
        var configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        // Without --readahead the daemon falls back to the same default as
        // the command (it runs as the same user).
        configuration.readaheadKB = getuid() == 0 ? MountCommand.defaultReadahead : nil
        XCTAssertEqual(try roundTrip(configuration), configuration)
        configuration.readaheadKB = 0
        XCTAssertEqual(try roundTrip(configuration), configuration)
        // --poll-us not given stays not given (the rings poll only when it is).
        XCTAssertFalse(try roundTrip(configuration).pollMicrosecondsGiven)
    }

    /// The verifying keys reach the daemon as the keys themselves (hex of
    /// the raw public key), not as paths it would read again, and the
    /// expected bundle id as given: the daemon checks the same origin.
    func testDaemonArguments_CarryTheOriginPolicy() throws {
        var configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        configuration.origin = OriginPolicy(signers: [try SigningKey.generate().publicKey, try SigningKey.generate().publicKey],
                                            bundleID: Array(0..<16))
        let argv = [Array(MountDaemon.flag.utf8)] + MountDaemonCommandLine.arguments(for: configuration)
        XCTAssertFalse(argv.contains(Array(ReaderOptions.verifyKey.utf8)))
        let settings = try MountDaemonCommandLine.settings(from: argv)
        XCTAssertEqual(settings.configuration.origin, configuration.origin)
        XCTAssertEqual(settings.configuration.mountpoint, configuration.mountpoint)
    }

    func testDaemonArguments_NeverCarryAKeyOption() {
        let configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        let argv = MountDaemonCommandLine.arguments(for: configuration).map { String(decoding: $0, as: UTF8.self) }
        for option in ["--key-file", "--passphrase-file", "--identity"] { XCTAssertFalse(argv.contains(option)) }
    }

    /// A remote bundle's daemon reads back the whole configuration the
    /// command resolved (display name, threads, network waits) and the
    /// non-secret remote settings, as the command would have them.
    func testDaemonArguments_RoundTripARemoteBundle() throws {
        let parsed = try MountMode(arguments: ["https://h/b?sig=s3cr3t", "/m", "--cache-dir", "/var/cache/x",
                                               "--connections", "9", "--prefetch", "all"].map { Array($0.utf8) })
        guard case .remote(let request, _, let options) = parsed else { return XCTFail("not remote: \(parsed)") }
        let argv = [Array(MountDaemon.flag.utf8)] + MountDaemonCommandLine.arguments(for: request.configuration, remote: options)
        XCTAssertFalse(argv.contains { String(decoding: $0, as: UTF8.self).contains("s3cr3t") })
        let settings = try MountDaemonCommandLine.settings(from: argv)
        XCTAssertEqual(settings.configuration, request.configuration)
        XCTAssertTrue(settings.configuration.waitsOnNetwork)
        XCTAssertEqual(settings.remote, options)
    }

    /// The command's arguments resolve to the mode that serves them; the
    /// daemon's flag is no option of the command's.
    func testMountMode_OneCasePerWayOfMounting() throws {
        func mode(_ arguments: String...) throws -> MountMode { try MountMode(arguments: arguments.map { Array($0.utf8) }) }
        guard case .help = try mode("--help") else { return XCTFail("--help") }
        guard case .version = try mode("--version") else { return XCTFail("--version") }
        guard case .background = try mode("/b", "/m") else { return XCTFail("background") }
        guard case .foreground = try mode("/b", "/m", "-f") else { return XCTFail("-f") }
        guard case .foreground = try mode("/b", "/m", "-o", "foreground") else { return XCTFail("-o foreground") }
        guard case .remote = try mode("http://h/b", "/m", "-f") else { return XCTFail("remote") }
        XCTAssertFalse(MountDaemonCommandLine.isDaemon(["/b", "/m", MountDaemon.flag].map { Array($0.utf8) }))
        XCTAssertThrowsError(try mode("/b", "/m", MountDaemon.flag)) { XCTAssertTrue($0 is UsageError) }
        XCTAssertThrowsError(try mode("/b")) { XCTAssertEqual(($0 as? UsageError)?.message, "missing BUNDLE or MOUNTPOINT") }
    }
}
