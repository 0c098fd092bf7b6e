import EncFSCore
@testable import EncFSCLI
@testable import EncFSMountCLI
import EncFSMount
import EncFSRemote
import Foundation
import SharedTestSupport
import XCTest

/// The pure parts of remote bundles: how an address is shown, header
/// files, the hand-over to the daemon, and the daemon's argv.
final class RemoteCommandLineTests: XCTestCase {
    private func shown(_ url: String) throws -> String {
        String(decoding: try RemoteLocation(Array(url.utf8)).displayName, as: UTF8.self)
    }

    func testDisplayName_HidesQueryAndUserInformation() throws {
        XCTAssertEqual(try shown("https://bucket.s3.amazonaws.com/a/b.bundle?X-Amz-Signature=abc&X-Amz-Credential=k"),
                       "https://bucket.s3.amazonaws.com/a/b.bundle?…")
        XCTAssertEqual(try shown("http://user:pass@host:8080/b?x"), "http://host:8080/b?…")
        XCTAssertEqual(try shown("HTTPS://host/path/b.bundle"), "HTTPS://host/path/b.bundle")
        XCTAssertEqual(try shown("https://host/b#frag"), "https://host/b?…")
        XCTAssertEqual(String(decoding: RemoteCommandLine.shown(Array("https://h/p?secret".utf8)), as: UTF8.self), "https://h/p?…")
        XCTAssertEqual(RemoteCommandLine.shown(Array("local/file?.encfs".utf8)), Array("local/file?.encfs".utf8))
    }

    func testLocation_RefusesOtherSchemesAndBadBytes() {
        for bad in ["ftp://host/b", "file:///etc/passwd", "https://", "https:///path", "https://host/a b", "https://host/\u{7f}"] {
            XCTAssertThrowsError(try RemoteLocation(Array(bad.utf8)), bad)
        }
        XCTAssertFalse(RemoteLocation.isRemote(Array("./https://x".utf8)))
    }

    func testHeaderFile_LinesCommentsAndErrorsWithoutContents() throws {
        let text = "# comment\r\nAuthorization: Bearer s3cr3t\r\n\nX-Extra:\tv\n"
        XCTAssertEqual(try RemoteOptions.parseHeaders(Array(text.utf8)),
                       [Array("Authorization: Bearer s3cr3t".utf8), Array("X-Extra:\tv".utf8)])
        for bad in ["no colon here s3cr3t", ": s3cr3t", "Bad Name: s3cr3t", "A: s3cr3t\u{0}"] {
            XCTAssertThrowsError(try RemoteOptions.parseHeaders(Array(("Ok: 1\n" + bad).utf8))) { error in
                let message = (error as? RemoteError)?.description ?? ""
                XCTAssertTrue(message.contains("line 2"), message)
                XCTAssertFalse(message.contains("s3cr3t"), message)
            }
        }
    }

    func testHandOver_RoundTripsAndRefusesTruncation() throws {
        for etag: [UInt8]? in [Array("\"abc-1\"".utf8), nil, []] {
            let handOver = RemoteHandOver(url: Array("https://h/b?sig=1".utf8),
                                          headers: [Array("Authorization: x".utf8), Array("A: b".utf8)],
                                          pinned: HTTPByteSource.Pinned(size: 1 << 40, etag: etag, head: Array(0..<200)))
            let bytes = handOver.encoded()
            XCTAssertEqual(try RemoteHandOver(decoding: bytes), handOver)
            for cut in [0, 1, 4, bytes.count / 2, bytes.count - 1] {
                XCTAssertThrowsError(try RemoteHandOver(decoding: Array(bytes.prefix(cut))), "cut at \(cut)")
            }
            XCTAssertThrowsError(try RemoteHandOver(decoding: bytes + [0]))
        }
    }

    /// The daemon's argv carries every remote setting but never the
    /// address's query or a header, and parses back to the same options.
    func testDaemonArguments_RoundTripRemoteSettingsWithoutSecrets() throws {
        var options = RemoteOptions()
        options.cacheDirectory = Array("/var/cache/x y".utf8)
        options.cacheSize = 123 << 20
        options.fetchSize = 1 << 20
        options.connections = 9
        options.prefetch = .all
        options.netTimeout = 0
        options.retries = 3
        let authority = try temporaryFile("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        options.caFile = Array(authority.utf8)
        options.headers = [Array("Authorization: Bearer s3cr3t".utf8)]
        let configuration = MountConfiguration(bundlePath: try RemoteLocation(Array("https://h/b?sig=s3cr3t".utf8)).displayName,
                                               mountpoint: Array("/m".utf8), indexCacheKB: 4096, threads: 16)
        let argv = MountDaemonCommandLine.arguments(for: configuration, remote: options)
        XCTAssertFalse(argv.contains { String(decoding: $0, as: UTF8.self).contains("s3cr3t") })
        let args = try MountDaemonCommandLine.parser.parse([Array(MountDaemon.flag.utf8)] + argv)
        XCTAssertTrue(args.has(RemoteCommandLine.daemonRemote))
        var parsed = try RemoteCommandLine.options(from: args)
        parsed.headers = options.headers
        XCTAssertEqual(parsed, options)
    }

    /// A file in a fresh temporary directory, removed by the teardown.
    private func temporaryFile(_ contents: String) throws -> String {
        let directory = try TemporaryDirectory(prefix: "encfs-remote")
        addTeardownBlock { directory.remove() }
        let path = directory.pathString + "/file"
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `--ca-file` is checked when the options are read, not at the first
    /// request: a missing file, and one without a PEM certificate.
    func testCAFile_MissingOrWithoutCertificateRefused() throws {
        let notPEM = try temporaryFile("just text\n")
        for (path, message) in [(notPEM + ".missing", "cannot read --ca-file"), (notPEM, "--ca-file holds no PEM certificate")] {
            let args = try MountCommand.parser.parse([Array("https://h/b".utf8), Array("/m".utf8), Array("--ca-file".utf8), Array(path.utf8)])
            XCTAssertThrowsError(try RemoteCommandLine.options(from: args)) { error in
                XCTAssertEqual((error as? CommandError)?.message, message, "\(error)")
                XCTAssertEqual((error as? CommandError)?.path, Array(path.utf8))
            }
        }
    }

    func testOptions_RefuseValuesOutOfRange() throws {
        for (option, value) in [("--fetch-size", "1K"), ("--fetch-size", "1G"), ("--connections", "0"), ("--connections", "65"),
                                ("--prefetch", "some"), ("--net-timeout", "-1"), ("--retries", "x"), ("--cache-size", "lots")] {
            let args = try MountCommand.parser.parse([Array("https://h/b".utf8), Array("/m".utf8), Array(option.utf8), Array(value.utf8)])
            XCTAssertThrowsError(try RemoteCommandLine.options(from: args), "\(option) \(value)") { error in
                XCTAssertTrue(error is UsageError, "\(option) \(value): \(error)")
            }
        }
    }

    /// `--address-file`: the first line, white space around it dropped,
    /// MOUNTPOINT the only operand; a file without an address refused
    /// naming the file and never its contents; BUNDLE beside it a usage
    /// error.
    func testAddressFile_FirstLineOnlyAddressesAccepted() throws {
        func configuration(_ arguments: [String]) throws -> MountConfiguration {
            try MountCommand.configuration(from: try MountCommand.parser.parse(arguments.map { Array($0.utf8) }))
        }
        let file = try temporaryFile("  https://h/b.encfs?sig=s3cr3t \r\nignored\n")
        let read = try configuration(["--address-file", file, "/m"])
        XCTAssertEqual(read.bundlePath, Array("https://h/b.encfs?sig=s3cr3t".utf8))
        XCTAssertEqual(read.mountpoint, Array("/m".utf8))
        let notAnAddress = try temporaryFile("/srv/local.encfs?s3cr3t\n")
        XCTAssertThrowsError(try configuration(["--address-file", notAnAddress, "/m"])) { error in
            XCTAssertEqual((error as? CommandError)?.message, "--address-file holds no http://, https:// or s3:// address")
            XCTAssertFalse("\(error)".contains("s3cr3t"))
        }
        XCTAssertThrowsError(try configuration(["--address-file", file + ".missing", "/m"])) { error in
            XCTAssertEqual((error as? CommandError)?.message, "cannot read --address-file")
        }
        for operands in [["https://h/b", "/m"], []] {
            XCTAssertThrowsError(try configuration(["--address-file", file] + operands)) { error in
                XCTAssertTrue(error is UsageError, "\(operands): \(error)")
            }
        }
    }
}
