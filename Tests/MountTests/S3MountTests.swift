import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `s3://BUCKET/KEY` bundles against a real S3 server on 127.0.0.1 (moto,
/// with Signature V4 enforced: Scripts/s3-test-server.py): every request
/// signed, the credentials chain, rotation while mounted, and no secret in
/// argv, environ, logs, /proc/mounts or the cache.
///
/// One server for the class (moto starts in seconds, not milliseconds).
final class S3MountTests: RemoteTestCase {
    nonisolated(unsafe) private static var server: S3Server?
    nonisolated(unsafe) private static var serverDirectory: String?
    nonisolated(unsafe) private static var bucketCount = 0

    override class func tearDown() {
        server?.stop()
        server = nil
        if let serverDirectory { try? FileManager.default.removeItem(atPath: serverDirectory) }
        super.tearDown()
    }

    private func s3() throws -> S3Server {
        if let server = Self.server { return server }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("encfs-s3-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        Self.serverDirectory = directory
        let server = try S3Server(directory: directory)
        Self.server = server
        return server
    }

    /// A tree of random files packed and uploaded to a new bucket as
    /// `fleet/bundle.encfs`: its address, source and key.
    private func publishS3(_ sizes: [String: Int]) throws -> (address: String, bucket: String, source: String, key: String) {
        let server = try s3()
        let source = try scratch.makeDirectory(uniqueName("src"))
        var generator = SeededGenerator(seed: UInt64(sizes.count * 31 + 7))
        for (file, size) in sizes.sorted(by: { $0.key < $1.key }) {
            if let slash = file.lastIndex(of: "/") {
                try FileManager.default.createDirectory(atPath: "\(source)/\(file[..<slash])", withIntermediateDirectories: true)
            }
            try Data(generator.bytes(size)).write(to: URL(fileURLWithPath: "\(source)/\(file)"))
        }
        let key = try makeKeyFile(uniqueName("key"))
        let bundle = scratch.url(uniqueName("bundle.encfs"))
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "64K"])
        Self.bucketCount += 1
        let bucket = "fleet-\(Self.bucketCount)"
        try server.put(bucket: bucket, key: "fleet/bundle.encfs", file: bundle)
        return ("s3://\(bucket)/fleet/bundle.encfs", bucket, source, key)
    }

    /// A shared credentials file holding `session` as profile `default`.
    private func writeCredentials(_ session: S3Server.Session, to path: String) throws {
        let text = "[default]\naws_access_key_id = \(session.id)\naws_secret_access_key = \(session.secret)\n"
            + "aws_session_token = \(session.token)\n"
        // Written then renamed, as a platform's credential agent does.
        try Data(text.utf8).write(to: URL(fileURLWithPath: path + ".new"))
        XCTAssertEqual(rename(path + ".new", path), 0)
    }

    /// Environment without any AWS variable of the test runner's.
    private var cleanEnvironment: [String: String?] {
        var env: [String: String?] = [:]
        for name in ProcessInfo.processInfo.environment.keys where name.hasPrefix("AWS_") { env[name] = .some(nil) }
        env["HOME"] = scratch.path
        return env
    }

    func testMount_PathStyleFromCredentialsFile_SecretsNowhere() throws {
        let server = try s3()
        let published = try publishS3(["a.bin": 700_000, "dir/b.txt": 1_000, "empty": 0])
        let session = try server.session()
        let credentials = scratch.url(uniqueName("credentials"))
        try writeCredentials(session, to: credentials)
        let cache = try scratch.makeDirectory(uniqueName("cache"))
        let mounted = try mount(published.address, keyArguments: ["--key-file", published.key],
                                environment: cleanEnvironment.merging(["AWS_CA_BUNDLE": "/nonexistent"]) { $1 },
                                options: ["--s3-endpoint", server.endpoint(), "--aws-credentials-file", credentials,
                                          "--cache-dir", cache, "--net-timeout", "10", "--fetch-size", "256K"])
        assertSuccess(try run("/usr/bin/diff", ["-r", published.source, mounted.mountpoint]), "diff -r over s3://")
        // The secret key and the token: nowhere a local user or a log sees.
        guard let pid = mounted.daemonPID else { return XCTFail("no daemon") }
        let environ = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        XCTAssertFalse(String(decoding: environ, as: UTF8.self).contains("AWS_"), "an AWS_ variable reached the daemon")
        for (what, bytes) in [("cmdline", try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))),
                              ("environ", environ),
                              ("/proc/mounts", try Data(contentsOf: URL(fileURLWithPath: "/proc/mounts"))),
                              ("log", (try? Data(contentsOf: URL(fileURLWithPath: mounted.logFile ?? ""))) ?? Data())] {
            let text = String(decoding: bytes, as: UTF8.self)
            XCTAssertFalse(text.contains(session.secret), "secret key in \(what)")
            XCTAssertFalse(text.contains(session.token), "session token in \(what)")
        }
        let inCache = try sh("grep -rlF -e \"$1\" -e \"$2\" \"$3\" || true", [session.secret, String(session.token.prefix(40)), cache])
        XCTAssertEqual(inCache.output, "", "a secret in the cache")
        XCTAssertTrue(String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/mounts")), as: UTF8.self)
            .contains(published.address), "/proc/mounts names the bundle as s3://bucket/key")
        unmount(mounted)
    }

    /// No past request's `Authorization` line (its signature) or
    /// `x-amz-security-token` line is left in the daemon's memory once
    /// the reads are over: our copies, the header lists handed to libcurl
    /// and libcurl's own request buffers are wiped. The session token
    /// itself stays (wiping storage): every request is signed with it.
    func testDaemonMemory_NoSignatureOrTokenLineOfPastRequests() throws {
        let server = try s3()
        let published = try publishS3(["a.bin": 3 << 20])
        let session = try server.session()
        let credentials = scratch.url(uniqueName("credentials"))
        try writeCredentials(session, to: credentials)
        let mounted = try mount(published.address, keyArguments: ["--key-file", published.key], environment: cleanEnvironment,
                                options: ["--s3-endpoint", server.endpoint(), "--aws-credentials-file", credentials,
                                          "--cache-dir", try scratch.makeDirectory(uniqueName("cache")), "--net-timeout", "10",
                                          "--fetch-size", "256K"])
        defer { unmount(mounted) }
        // Every unit of the file fetched (a dozen signed requests or
        // more): no request is in flight when memory is searched.
        XCTAssertEqual(try sha256(mounted.path("a.bin")), try sha256("\(published.source)/a.bin"))
        guard let pid = mounted.daemonPID else { return XCTFail("no daemon") }
        let token = NSRegularExpression.escapedPattern(for: session.token)
        // A freed block's first 16 bytes are malloc's: a header line that
        // begins a block is found by its tail ("oken: TOKEN").
        let found = try patternsFound(inMemoryOf: pid, ["signature": "Signature=[0-9a-f]{64}",
                                                        "token-line": "oken: ?\(token)"])
        XCTAssertEqual(found, [], "lines of past signed requests left in the daemon's memory")
    }

    func testMount_VirtualHostedFromEnvironment_AndInspect() throws {
        let server = try s3()
        let published = try publishS3(["x/y.bin": 90_000])
        let session = try server.session()
        var env = cleanEnvironment
        env["AWS_ACCESS_KEY_ID"] = session.id
        env["AWS_SECRET_ACCESS_KEY"] = session.secret
        env["AWS_SESSION_TOKEN"] = session.token
        env["AWS_REGION"] = "us-east-1"
        // BUCKET.localhost:PORT: libcurl resolves it to 127.0.0.1, moto
        // takes the bucket from the Host header, and the signature covers it.
        let options = ["--s3-endpoint", server.endpoint(host: "localhost"), "--s3-virtual-hosted"]
        let mounted = try mount(published.address, keyArguments: ["--key-file", published.key], environment: env,
                                options: options + ["--cache-dir", try scratch.makeDirectory(uniqueName("cache")), "--net-timeout", "10"])
        XCTAssertEqual(try sha256(mounted.path("x/y.bin")), try sha256("\(published.source)/x/y.bin"))
        guard let pid = mounted.daemonPID else { return XCTFail("no daemon") }
        let environ = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ")), as: UTF8.self)
        XCTAssertFalse(environ.contains("AWS_"), "an AWS_ variable reached the daemon")
        XCTAssertFalse(environ.contains(session.secret))
        unmount(mounted)
        let listing = try check(try Tools.inspect(), ["ls", published.address, "x", "--key-file", published.key, "--cache-dir",
                                                      try scratch.makeDirectory(uniqueName("cache"))] + options, environment: env)
        XCTAssertEqual(listing.output, "y.bin\n")
    }

    /// The systemd credential, and the fstab spellings of the options.
    func testCredentialFromSystemdCredential_AndFstabSpellings() throws {
        let server = try s3()
        let published = try publishS3(["a.bin": 50_000])
        let directory = try scratch.makeDirectory(uniqueName("credentials"))
        try writeCredentials(try server.session(), to: "\(directory)/aws")
        var env = cleanEnvironment
        env["CREDENTIALS_DIRECTORY"] = directory
        let viaCredential = try mount(published.address, keyArguments: ["--key-file", published.key], environment: env,
                                      options: ["--s3-endpoint", server.endpoint(), "--aws-credentials-credential", "aws",
                                                "--cache-dir", try scratch.makeDirectory(uniqueName("cache"))])
        XCTAssertEqual(try sha256(viaCredential.path("a.bin")), try sha256("\(published.source)/a.bin"))
        unmount(viaCredential)
        let viaFstab = try mount(published.address, keyArguments: ["--key-file", published.key], environment: cleanEnvironment,
                                 options: ["-o", "s3_endpoint=\(server.endpoint()),aws_credentials_file=\(directory)/aws,s3_path_style",
                                           "--cache-dir", try scratch.makeDirectory(uniqueName("cache"))])
        XCTAssertEqual(try sha256(viaFstab.path("a.bin")), try sha256("\(published.source)/a.bin"))
        unmount(viaFstab)
    }

    func testWrongSecret_OneClearLine_Exit1() throws {
        let server = try s3()
        let published = try publishS3(["a.bin": 10_000])
        let session = try server.session()
        var env = cleanEnvironment
        env["AWS_ACCESS_KEY_ID"] = session.id
        env["AWS_SECRET_ACCESS_KEY"] = session.wrongSecret
        env["AWS_SESSION_TOKEN"] = session.token
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt"))
        // Unmounted however the test ends, should the mount wrongly succeed.
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let result = try run(try Tools.mount(), [published.address, mountpoint, "--key-file", published.key, "--s3-endpoint",
                                                 server.endpoint(), "--cache-dir", try scratch.makeDirectory(uniqueName("cache"))],
                             environment: env)
        XCTAssertEqual(result.status, 1, result.summary)
        let lines = result.errorOutput.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, result.summary)
        XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: the server refused the AWS credentials (SignatureDoesNotMatch"),
                      result.summary)
        XCTAssertTrue(result.errorOutput.contains(published.address), result.summary)
        XCTAssertFalse(result.errorOutput.contains(String(session.secret.dropFirst())), "the secret in a message")
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    /// The platform rotates the session: a new token in the credentials
    /// file, the old one revoked at the server. Reads go on without a
    /// remount, and the log says so in one line.
    func testRotation_SessionTokenInFile_ReadsContinue() throws {
        let server = try s3()
        let published = try publishS3(["large.bin": 6 << 20])
        let first = try server.session()
        let credentials = scratch.url(uniqueName("credentials"))
        try writeCredentials(first, to: credentials)
        var env = cleanEnvironment
        env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent"
        let mounted = try mount(published.address, keyArguments: ["--key-file", published.key], environment: env,
                                options: ["--s3-endpoint", server.endpoint(), "--aws-credentials-file", credentials,
                                          "--cache-dir", try scratch.makeDirectory(uniqueName("cache")), "--net-timeout", "10",
                                          "--fetch-size", "256K"])
        let file = mounted.path("large.bin")
        XCTAssertEqual(try pread(file, offset: 0, count: 65536).result,
                       try expected("\(published.source)/large.bin", offset: 0, count: 65536))
        let second = try server.session()
        try writeCredentials(second, to: credentials)
        try server.revoke(first.id)
        // Every later unit is fetched with the new session only.
        XCTAssertEqual(try sha256(file), try sha256("\(published.source)/large.bin"))
        let log = (try? String(contentsOfFile: mounted.logFile ?? "", encoding: .utf8)) ?? ""
        let rotations = log.split(separator: "\n").filter { $0.contains("AWS credentials read again") }
        XCTAssertEqual(rotations.count, 1, log)
        XCTAssertTrue(rotations.first?.contains(second.id) ?? false, log)
        XCTAssertFalse(log.contains(second.secret) || log.contains(second.token))
        unmount(mounted)
    }
}
