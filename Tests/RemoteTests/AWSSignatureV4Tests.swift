import CryptCore
@testable import EncFSRemote
import XCTest

/// Our Signature V4 signer against AWS's published example ("Signature
/// Calculations for the Authorization Header", GET Object with a Range
/// header; the same figures recomputed with Python's hmac): the whole
/// Authorization line, byte for byte. The moto tests (S3MountTests,
/// S3LibraryTests, ServeS3Tests, S3EmbedTests) check it against a server.
final class AWSSignatureV4Tests: XCTestCase {
    private func credentials(secret: String) -> AWSCredentials {
        AWSCredentials(accessKeyID: Array("AKIAIOSFODNN7EXAMPLE".utf8), secretAccessKey: SecureBytes(copying: Array(secret.utf8)),
                       sessionToken: nil)
    }

    func testGetObjectExample_AuthorizationAsPublished() throws {
        let emptyHash = Array("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".utf8)
        let headers: [(name: [UInt8], value: [UInt8])] = [
            (Array("host".utf8), Array("examplebucket.s3.amazonaws.com".utf8)),
            (Array("range".utf8), Array("bytes=0-9".utf8)),
            (Array("x-amz-content-sha256".utf8), emptyHash),
            (Array("x-amz-date".utf8), Array("20130524T000000Z".utf8)),
        ]
        let line = try AWSSignatureV4(region: "us-east-1").authorization(
            method: "GET", path: Array("/test.txt".utf8), query: [], headers: headers, payloadHash: emptyHash,
            amzDate: Array("20130524T000000Z".utf8), credentials: credentials(secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))
        XCTAssertEqual(String(decoding: line, as: UTF8.self),
                       "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                       + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                       + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        // Another secret, another signature; the secret never in the line.
        let other = try AWSSignatureV4(region: "us-east-1").authorization(
            method: "GET", path: Array("/test.txt".utf8), query: [], headers: headers, payloadHash: emptyHash,
            amzDate: Array("20130524T000000Z".utf8), credentials: credentials(secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ"))
        XCTAssertNotEqual(other, line)
        XCTAssertFalse(String(decoding: line, as: UTF8.self).contains("wJalr"))
    }

    func testAmzDate_UTC() {
        XCTAssertEqual(String(decoding: AWSSignatureV4.amzDate(1_369_353_600), as: UTF8.self), "20130524T000000Z")
        XCTAssertEqual(String(decoding: AWSSignatureV4.amzDate(1_369_353_600 + 86_399), as: UTF8.self), "20130524T235959Z")
    }
}
