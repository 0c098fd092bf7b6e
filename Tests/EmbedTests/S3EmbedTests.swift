import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `s3://BUCKET/KEY` through libencfs's C ABI and the Python package,
/// against moto with Signature V4 enforced (``S3Server``): the
/// credentials, region and endpoint come from the environment, as for an
/// AWS SDK (`AWS_ENDPOINT_URL` names a server other than AWS). The Python
/// package is the wheel of Scripts/package-python.sh installed into a new
/// virtual environment, the C program the example built with pkg-config.
final class S3EmbedTests: EmbedTestCase {
    /// The Python script run in the venv: reads a file over s3://, then
    /// opens again with the secret key of `WRONG_SECRET` and prints the
    /// one error it gets.
    private static let script = #"""
    import os, sys
    import encfs
    here = os.path.dirname(encfs.__file__)
    assert here.startswith(sys.prefix), (here, sys.prefix)
    url, key, expected = sys.argv[1:4]
    with encfs.Bundle(url, key_file=key) as b:
        assert b.read_bytes("docs/data.csv") == open(expected, "rb").read()
        print("read", len(b.read_bytes("big.bin")))
    os.environ["AWS_SECRET_ACCESS_KEY"] = os.environ.pop("WRONG_SECRET")
    try:
        encfs.Bundle(url, key_file=key)
    except encfs.Error as error:
        print("refused:", type(error).__name__, error)
    else:
        sys.exit("opened with a wrong secret")
    """#

    func testS3_PythonWheelInVenvAndCExample_WrongSecretOneError() throws {
        let fixture = try EmbedFixture.shared()
        let server = try S3Server(directory: scratch.path)
        defer { server.stop() }
        try server.put(bucket: "embed-fleet", key: "apps/app.bundle", file: fixture.path("app.bundle"))
        let session = try server.session()
        let address = "s3://embed-fleet/apps/app.bundle"
        let aws: [String: String?] = ["AWS_ACCESS_KEY_ID": session.id, "AWS_SECRET_ACCESS_KEY": session.secret, "AWS_SESSION_TOKEN": session.token,
                   "AWS_ENDPOINT_URL": server.endpoint(), "AWS_REGION": "us-east-1"]
        // Nothing of the build or the runner's AWS settings on any path.
        var clean: [String: String?] = ["PATH": "/usr/bin:/bin", "HOME": scratch.path, "LANG": "C.UTF-8", "ENCFS_LIBRARY": nil,
                                        "PYTHONPATH": nil, "LD_LIBRARY_PATH": nil]
        for name in ProcessInfo.processInfo.environment.keys where name.hasPrefix("AWS_") { clean[name] = .some(nil) }

        let dist = try scratch.makeDirectory("dist")
        try Subprocess.check("/bin/bash", [EmbedFixture.root + "/Scripts/package-python.sh", dist],
                             environment: ["ENCFS_BIN_DIR": fixture.binDirectory])
        let wheels = try FileManager.default.contentsOfDirectory(atPath: dist).filter { $0.hasSuffix(".whl") }
        XCTAssertEqual(wheels.count, 1, "\(wheels)")
        let wheel = try XCTUnwrap(wheels.first)
        let venv = scratch.url("venv")
        try Subprocess.check("python3", ["-m", "venv", "--without-pip", venv])
        try Subprocess.check("python3", ["-m", "pip", "--python", venv + "/bin/python", "install", "-q", "--no-index", "--no-deps",
                                         "--disable-pip-version-check", dist + "/" + wheel])
        let wrong = session.wrongSecret
        let python = try Subprocess.run(venv + "/bin/python", ["-I", "-c", Self.script, address, fixture.path("app.key"),
                                                               fixture.path("src/docs/data.csv")],
                                        environment: clean.merging(aws) { $1 }.merging(["WRONG_SECRET": .some(wrong)]) { $1 },
                                        timeout: 120)
        XCTAssertEqual(python.status, 0, python.summary)
        let lines = python.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "read 1048699", python.output)
        XCTAssertEqual(lines.count, 2, python.output)
        let refusal = lines.last ?? ""
        XCTAssertTrue(refusal.hasPrefix("refused: IOFailure ") && refusal.contains("SignatureDoesNotMatch"), refusal)
        XCTAssertTrue(refusal.contains(address), refusal)
        XCTAssertFalse(python.output.contains(String(session.secret.dropFirst())) || python.errorOutput.contains(String(wrong.dropFirst())),
                       "a secret in a message")

        // The C example, built as a C user builds it, over the same address.
        let pc = try Subprocess.check("pkg-config", ["--cflags", "--libs", "encfs"],
                                      environment: ["PKG_CONFIG_PATH": fixture.pkgConfigPath])
        let program = scratch.url("encfs-cat")
        try Subprocess.check("cc", ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", EmbedFixture.root + "/examples/c/encfs-cat.c",
                                    "-o", program] + pc.output.split(whereSeparator: \.isWhitespace).map(String.init))
        let runtime = clean.merging(["LD_LIBRARY_PATH": .some(fixture.binDirectory)]) { $1 }
        let cat = try Subprocess.run(program, [address, fixture.path("app.key"), "docs/data.csv"],
                                     environment: runtime.merging(aws) { $1 })
        XCTAssertEqual(cat.status, 0, cat.summary)
        XCTAssertEqual(cat.output, try String(contentsOfFile: fixture.path("src/docs/data.csv"), encoding: .utf8))
        let refused = try Subprocess.run(program, [address, fixture.path("app.key")],
                                         environment: runtime.merging(aws) { $1 }.merging(["AWS_SECRET_ACCESS_KEY": .some(wrong)]) { $1 })
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertEqual(refused.output, "")
        XCTAssertEqual(refused.errorOutput.split(separator: "\n").count, 1, refused.errorOutput)
        XCTAssertTrue(refused.errorOutput.contains("SignatureDoesNotMatch"), refused.errorOutput)
        XCTAssertFalse(refused.errorOutput.contains(String(wrong.dropFirst())), "the secret in a message")
    }
}
