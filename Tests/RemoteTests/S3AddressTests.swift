import CryptCore
import EncFSRemote
import Foundation
import XCTest

/// `s3://BUCKET/KEY` addresses and AWS credentials files (issue 30): what
/// is requested, what is shown, what a profile holds, and what the
/// daemon's hand-over carries.
final class S3AddressTests: XCTestCase {
    private func location(_ address: String, endpoint: String? = nil, region: String = "eu-west-1",
                          addressing: S3Settings.Addressing = .automatic) throws -> RemoteLocation {
        var settings = S3Settings()
        settings.endpoint = endpoint.map { Array($0.utf8) }
        settings.region = region
        settings.addressing = addressing
        return try RemoteLocation(Array(address.utf8), s3: settings)
    }

    func testAddressing_AWSVirtualHostedCustomPathStyle() throws {
        let cases: [(String, String?, S3Settings.Addressing, String)] = [
            ("s3://fleet/app/b.encfs", nil, .automatic, "https://fleet.s3.eu-west-1.amazonaws.com/app/b.encfs"),
            ("s3://fleet/app/b.encfs", nil, .pathStyle, "https://s3.eu-west-1.amazonaws.com/fleet/app/b.encfs"),
            // A dot in the bucket: no wildcard certificate covers it.
            ("s3://fleet.eu/b", nil, .automatic, "https://s3.eu-west-1.amazonaws.com/fleet.eu/b"),
            ("s3://fleet/b", "http://127.0.0.1:9000", .automatic, "http://127.0.0.1:9000/fleet/b"),
            ("s3://fleet/b", "https://minio:9000/", .virtualHosted, "https://fleet.minio:9000/b"),
            // Bytes outside the unreserved set percent-encoded once.
            ("s3://fleet/a=b+c/ü", "http://h", .pathStyle, "http://h/fleet/a%3Db%2Bc/%C3%BC"),
        ]
        for (address, endpoint, addressing, expected) in cases {
            let made = try location(address, endpoint: endpoint, addressing: addressing)
            XCTAssertEqual(String(decoding: made.url, as: UTF8.self), expected, address)
            XCTAssertEqual(String(decoding: made.displayName, as: UTF8.self), address)
            XCTAssertEqual(made.signingRegion, "eu-west-1")
        }
        XCTAssertNil(try RemoteLocation(Array("https://h/x".utf8)).signingRegion, "http(s) is not signed")
    }

    func testInvalidAddresses_Refused() {
        for bad in ["s3://", "s3://fleet", "s3://fleet/", "s3://Fleet/k", "s3://ab/k", "s3://fleet/k\u{01}"] {
            XCTAssertThrowsError(try location(bad), bad)
        }
        XCTAssertThrowsError(try location("s3://fleet/k", endpoint: "ftp://h"))
        XCTAssertThrowsError(try location("s3://fleet/k", endpoint: "http://user@h"))
        XCTAssertThrowsError(try location("s3://fleet/k", region: "EU WEST"))
    }

    private func parse(_ text: String, profile: String = "default", config: Bool = false) throws -> AWSCredentials? {
        try Array(text.utf8).withUnsafeBytes { try AWSCredentials.parse($0, profile: Array(profile.utf8), configFile: config) }
    }

    func testCredentialsFile_Profiles() throws {
        let text = """
            # comment
            [default]
            aws_access_key_id = AKIADEFAULT
            aws_secret_access_key=secret/default+
            [fleet]
            AWS_ACCESS_KEY_ID = ASIAFLEET\r
            aws_secret_access_key = s2
            aws_session_token = token==
            [half]
            aws_access_key_id = AKIAHALF
            """
        let defaults = try XCTUnwrap(try parse(text))
        XCTAssertEqual(defaults.accessKeyID, Array("AKIADEFAULT".utf8))
        XCTAssertEqual(defaults.secretAccessKey, SecureBytes(copying: Array("secret/default+".utf8)))
        XCTAssertNil(defaults.sessionToken)
        let fleet = try XCTUnwrap(try parse(text, profile: "fleet"))
        XCTAssertEqual(fleet.accessKeyID, Array("ASIAFLEET".utf8))
        XCTAssertEqual(fleet.sessionToken, SecureBytes(copying: Array("token==".utf8)))
        XCTAssertNil(try parse(text, profile: "absent"))
        XCTAssertThrowsError(try parse(text, profile: "half")) { error in
            XCTAssertFalse("\(error)".contains("AKIAHALF"), "a value in a message")
        }
        // The config file names profiles [profile NAME], but [default].
        let config = "[profile fleet]\naws_access_key_id = A\naws_secret_access_key = B\n[fleet]\naws_access_key_id = X\n"
        XCTAssertEqual(try parse(config, profile: "fleet", config: true)?.accessKeyID, Array("A".utf8))
    }

    func testHandOver_CarriesCredentialsMirrorsAndTail() throws {
        var handOver = RemoteHandOver(url: Array("s3://fleet/b".utf8), headers: [],
                                      pinned: HTTPByteSource.Pinned(size: 100, etag: nil, head: [1, 2, 3], tail: [9, 8]))
        handOver.credentials = AWSCredentials(accessKeyID: Array("ASIA".utf8), secretAccessKey: SecureBytes(copying: Array("s".utf8)),
                                              sessionToken: SecureBytes(copying: Array("t".utf8)))
        handOver.credentialOrigin = .file(path: Array("/etc/aws".utf8), profile: Array("fleet".utf8), configFile: false)
        handOver.mirrors = [Array("https://m/b?sig".utf8)]
        let decoded = try RemoteHandOver(decoding: handOver.encoded())
        XCTAssertEqual(decoded, handOver)
        XCTAssertThrowsError(try RemoteHandOver(decoding: handOver.encoded().dropLast()))
    }
}
