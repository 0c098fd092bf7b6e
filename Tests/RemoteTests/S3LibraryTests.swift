import EncFS
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `EncryptedBundle(url: "s3://…")` through the public API against moto
/// with Signature V4 enforced (``S3Server``): the credentials, region and
/// endpoint come from the environment as for an AWS SDK
/// (`AWS_ENDPOINT_URL` for a server other than AWS).
final class S3LibraryTests: ToolTestCase {
    private static let names = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                                "AWS_REGION", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"]

    func testOpenS3URL_SignedRequests_WrongSecretRefused() throws {
        let saved = Self.names.map { name in (name, getenv(name).map { String(cString: $0) }) }
        defer { for (name, value) in saved { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }
        let server = try S3Server(directory: scratch.path)
        defer { server.stop() }
        let source = try scratch.makeDirectory("src")
        var generator = SeededGenerator(seed: 30)
        try scratch.write("src/a.bin", generator.bytes(200_000))
        let key = try makeKeyFile()
        let bundle = scratch.url("app.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "16K"])
        try server.put(bucket: "library", key: "app.encfs", file: bundle)
        let session = try server.session()
        for name in Self.names { unsetenv(name) }
        setenv("AWS_ACCESS_KEY_ID", session.id, 1)
        setenv("AWS_SECRET_ACCESS_KEY", session.secret, 1)
        setenv("AWS_SESSION_TOKEN", session.token, 1)
        setenv("AWS_ENDPOINT_URL", server.endpoint(), 1)
        let remote = try EncryptedBundle(url: "s3://library/app.encfs", unlock: .keyFile(key))
        XCTAssertEqual(try remote.contents(atPath: "a.bin"), FileManager.default.contents(atPath: "\(source)/a.bin"))
        setenv("AWS_SECRET_ACCESS_KEY", "wrong" + session.secret, 1)
        XCTAssertThrowsError(try EncryptedBundle(url: "s3://library/app.encfs", unlock: .keyFile(key))) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("SignatureDoesNotMatch"), text)
            XCTAssertFalse(text.contains(session.secret), text)
        }
    }
}
