import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-serve s3://BUCKET/KEY` against a real S3 server on 127.0.0.1
/// (moto with Signature V4 enforced: ``S3Server``), read back with curl:
/// the shared remote options (`--s3-endpoint`, `--aws-credentials-file`)
/// work here as for encfs-mount, and a wrong secret is one clear line.
final class ServeS3Tests: ServeTestCase {
    /// An environment without any AWS variable of the test runner's.
    private var cleanEnvironment: [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8"]
    }

    private func writeCredentials(id: String, secret: String, token: String, to path: String) throws {
        let text = "[default]\naws_access_key_id = \(id)\naws_secret_access_key = \(secret)\naws_session_token = \(token)\n"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    func testServeS3_SignedRequests_WrongSecretOneLine() throws {
        let server = try S3Server(directory: work)
        defer { server.stop() }
        let source = work + "/src"
        try FileManager.default.createDirectory(atPath: source + "/dir", withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 3030)
        let payload = Data(generator.bytes(300_000))
        try payload.write(to: URL(fileURLWithPath: source + "/dir/a.bin"))
        let key = try makeKey()
        let bundle = try pack(source, key: key, extra: ["--chunk-size", "16K"])
        try server.put(bucket: "serve-fleet", key: "apps/b.encfs", file: bundle)
        let session = try server.session()
        let credentials = work + "/credentials"
        try writeCredentials(id: session.id, secret: session.secret, token: session.token, to: credentials)
        let address = "s3://serve-fleet/apps/b.encfs"
        let common = ["--key-file", key, "--s3-endpoint", server.endpoint(), "--net-timeout", "10"]

        let serving = try serve([address, "--aws-credentials-file", credentials] + common, environment: cleanEnvironment)
        let response = try curl(serving.url + "dir/a.bin")
        XCTAssertEqual(response.status, 200, serving.log)
        XCTAssertEqual(response.body, payload)
        let ranged = try curl(serving.url + "dir/a.bin", ["-r", "100000-100099"])
        XCTAssertEqual(ranged.status, 206)
        XCTAssertEqual(ranged.body, payload[100_000..<100_100])
        for what in ["cmdline", "environ"] {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(serving.pid)/\(what)")), as: UTF8.self)
            XCTAssertFalse(text.contains(session.secret) || text.contains(session.token), "a secret in /proc/PID/\(what)")
        }
        XCTAssertEqual(serving.stop(), 0, serving.log)
        XCTAssertFalse(serving.log.contains(session.secret) || serving.log.contains(session.token), "a secret in the log")

        // The same session with a wrong secret key: moto refuses the
        // signature; encfs-serve says so in one line, exit 1, no URL.
        let wrongSecret = session.wrongSecret
        try writeCredentials(id: session.id, secret: wrongSecret, token: session.token, to: credentials)
        let refused = try execute(tool("encfs-serve"), [address, "--aws-credentials-file", credentials] + common,
                                  environment: cleanEnvironment)
        XCTAssertEqual(refused.status, 1, refused.errorText)
        XCTAssertEqual(refused.output, Data(), "printed a URL")
        XCTAssertEqual(refused.errorLines.count, 1, refused.errorText)
        XCTAssertTrue(refused.errorText.hasPrefix("encfs-serve: error: the server refused the AWS credentials (SignatureDoesNotMatch"),
                      refused.errorText)
        XCTAssertTrue(refused.errorText.contains(address), refused.errorText)
        XCTAssertFalse(refused.errorText.contains(String(session.secret.dropFirst())), "the secret in a message")
    }
}
