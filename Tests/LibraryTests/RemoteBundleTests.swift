import EncFS
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `EncryptedBundle(url:unlock:options:)`: the shared fixture bundle served
/// by a real nginx on 127.0.0.1 (ranges and ETags), read through the public
/// API with no disk cache, and an error that names the address without
/// its query string.
final class RemoteBundleTests: XCTestCase {
    /// nginx serving the directory of `file` on a free port; stopped by
    /// the test's teardown.
    private func serve(_ file: String) throws -> String {
        guard access("/usr/sbin/nginx", X_OK) == 0 else { throw TestFailure("nginx is not installed (Scripts/install-deps.sh)") }
        let directory = (file as NSString).deletingLastPathComponent
        let prefix = NSTemporaryDirectory() + "encfs-nginx-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw TestFailure("no free port on 127.0.0.1") }
            let config = """
            worker_processes 1; daemon off; master_process off; pid \(prefix)/pid; error_log \(prefix)/error.log;
            events { worker_connections 64; }
            http { access_log off; client_body_temp_path \(prefix)/b; proxy_temp_path \(prefix)/p;
                   fastcgi_temp_path \(prefix)/f; uwsgi_temp_path \(prefix)/u; scgi_temp_path \(prefix)/s;
                   server { listen 127.0.0.1:\(port); root \(directory); } }
            """
            try config.write(toFile: "\(prefix)/nginx.conf", atomically: true, encoding: .utf8)
            let nginx = Process()
            nginx.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
            nginx.arguments = ["-p", prefix, "-c", "\(prefix)/nginx.conf"]
            nginx.standardError = FileHandle.nullDevice
            try nginx.run()
            addTeardownBlock {
                nginx.terminate()
                nginx.waitUntilExit()
                try? FileManager.default.removeItem(atPath: prefix)
            }
            for _ in 0..<100 where nginx.isRunning {
                if LoopbackPort.accepts(port) { return "http://127.0.0.1:\(port)/" }
                usleep(50_000)
            }
        }
        throw TestFailure("nginx did not start")
    }


    func testOpenURL_ReadsLikeTheFile() throws {
        let fixture = try LibraryFixture.shared()
        let base = try serve(fixture.appBundle)
        let name = (fixture.appBundle as NSString).lastPathComponent
        let remote = try EncryptedBundle(url: base + name + "?X-Amz-Signature=abc", unlock: .keyFile(fixture.keyFile))
        let local = try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.keyFile))
        XCTAssertEqual(try remote.subpathsOfDirectory(atBytePath: []), try local.subpathsOfDirectory(atBytePath: []))
        XCTAssertEqual([UInt8](try remote.contents(atPath: "big.bin")), fixture.contents("big.bin"))
        XCTAssertEqual([UInt8](try remote.contents(atPath: "docs/a.pdf")), fixture.contents("docs/a.pdf"))
        XCTAssertEqual(remote.bundleID, local.bundleID)
    }

    func testOpenURL_MissingObjectNamesAddressWithoutQuery() throws {
        let fixture = try LibraryFixture.shared()
        let base = try serve(fixture.appBundle)
        var options = RemoteOptions()
        options.netTimeout = 2
        XCTAssertThrowsError(try EncryptedBundle(url: base + "gone.bundle?sig=s3cr3t", unlock: .keyFile(fixture.keyFile),
                                                 options: options)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("404"), text)
            XCTAssertFalse(text.contains("s3cr3t"), text)
        }
    }
}
