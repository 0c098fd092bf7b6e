import CryptCore
import EncFSCore
@testable import EncFSCLI
@testable import EncFSMountCLI
import EncFSMount
import XCTest

/// The daemon's argv carries every serving setting: what the command
/// parsed, written by `daemonArguments`, parses back to the same thing.
final class MountCommandTests: XCTestCase {
    private func roundTrip(_ configuration: MountConfiguration) throws -> MountConfiguration {
        let argv = [Array(MountDaemon.flag.utf8)] + MountCommand.daemonArguments(configuration)
        let args = try MountCommand.parser.parse(argv)
        XCTAssertTrue(args.has(MountDaemon.flag))
        return try MountCommand.configuration(from: args)
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
        let argv = [Array(MountDaemon.flag.utf8)] + MountCommand.daemonArguments(configuration)
        XCTAssertFalse(argv.contains(Array(ReaderOptions.verifyKey.utf8)))
        let args = try MountCommand.parser.parse(argv)
        XCTAssertEqual(try ReaderOptions.origin(from: args), configuration.origin)
        XCTAssertEqual(try MountCommand.configuration(from: args).mountpoint, configuration.mountpoint)
    }

    func testDaemonArguments_NeverCarryAKeyOption() {
        let configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        let argv = MountCommand.daemonArguments(configuration).map { String(decoding: $0, as: UTF8.self) }
        for option in ["--key-file", "--passphrase-file", "--identity"] { XCTAssertFalse(argv.contains(option)) }
    }
}
