import Foundation
import SharedTestSupport
import XCTest

/// The Python package in bindings/python, by its own pytest suite, against
/// this build's libencfs.so, the shared fixture and nginx serving it.
/// pytest comes from PyPI (Scripts/install-deps.sh installs it with
/// fsspec and pandas, for the python3 on PATH).
final class PythonTests: EmbedTestCase {
    func testPytestSuite() throws {
        let fixture = try EmbedFixture.shared()
        let url = try serveAppBundle()
        let base = String(url.dropLast("app.bundle".count))
        let run = try Subprocess.run("python3", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                                                 EmbedFixture.root + "/bindings/python/tests"],
                                     environment: ["ENCFS_BIN_DIR": fixture.binDirectory,
                                                   "ENCFS_LIBRARY": fixture.binDirectory + "/libencfs.so",
                                                   "ENCFS_TEST_FIXTURE": fixture.directory,
                                                   "ENCFS_TEST_URL": base,
                                                   "PYTHONDONTWRITEBYTECODE": "1"],
                                     timeout: 900)
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.contains(" passed"), run.output)
        // Every test ran: none skipped for a missing tool or server.
        XCTAssertFalse(run.output.contains("skipped"), run.output)
        XCTAssertFalse(run.output.contains("failed"), run.output)
    }

    /// An https:// bundle through encfs_options_set_ca_file: opens with
    /// the test authority's certificate, and is refused without it.
    func testHTTPS_CAFileOpensAndItsAbsenceRefuses() throws {
        let fixture = try EmbedFixture.shared()
        let server = try RemoteServer(test: self, withProxy: false, transport: .https)
        try FileManager.default.copyItem(atPath: fixture.path("app.bundle"), toPath: server.root + "/app.bundle")
        let certificate = try XCTUnwrap(server.certificate)
        let script = """
        import sys, encfs
        url, key, ca = sys.argv[1:4]
        with encfs.Bundle(url, key_file=key, ca_file=ca) as b:
            assert b.read_bytes("docs/b.txt") == b"hello\\n"
        try:
            encfs.Bundle(url, key_file=key)
        except encfs.IOFailure as error:
            print("refused:", error)
        else:
            sys.exit("opened without the authority's certificate")
        """
        let run = try Subprocess.run("python3", ["-c", script, server.url("app.bundle"), fixture.path("app.key"), certificate],
                                     environment: ["ENCFS_LIBRARY": fixture.binDirectory + "/libencfs.so",
                                                   "PYTHONPATH": EmbedFixture.root + "/bindings/python"])
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.hasPrefix("refused: "), run.output)
    }

    /// ctypes releases the GIL for the duration of a read: while one thread
    /// waits inside encfs_file_pread for a response the fault proxy holds
    /// back, the main thread runs Python (it polls the proxy) and sees the
    /// reader still blocked. Ordering only, no time is measured: the
    /// latency only keeps the reader inside the call long enough.
    func testRead_ReleasesTheGIL() throws {
        let fixture = try EmbedFixture.shared()
        let server = try RemoteServer(test: self, withProxy: true)
        // 12 MiB: more than one 4 MiB fetch unit, so a read in the middle
        // needs a request of its own after the open.
        let source = try scratch.makeDirectory("gil-src")
        _ = try scratch.write("gil-src/big.bin", [UInt8](repeating: 0x5A, count: 12 << 20))
        try Subprocess.check(fixture.binDirectory + "/encfs-pack", ["--quiet", "--key-file", fixture.path("app.key"), "--",
                                                                    source, server.root + "/gil.bundle"])
        let script = """
        import json, sys, threading, urllib.request, encfs
        url, key, control = sys.argv[1:4]
        def proxy(path):
            return json.load(urllib.request.urlopen(control + path))
        b = encfs.Bundle(url, key_file=key)
        proxy("/__proxy/set?mode=pass&latency_ms=3000")
        before = proxy("/__proxy/stats")["requests"]
        done, result = threading.Event(), []
        def read():
            with b.open("big.bin", buffering=0) as f:
                result.append(f.pread(4096, 6 << 20))
            done.set()
        reader = threading.Thread(target=read)
        reader.start()
        while proxy("/__proxy/stats")["requests"] == before:
            pass
        ran_while_blocked = not done.is_set()
        proxy("/__proxy/set?mode=pass&latency_ms=0")
        reader.join()
        assert result == [b"\\x5a" * 4096], result
        print("ran while blocked:", ran_while_blocked)
        """
        let control = "http://127.0.0.1:\(try XCTUnwrap(server.proxyPort))"
        let run = try Subprocess.run("python3", ["-c", script, server.url("gil.bundle"), fixture.path("app.key"), control],
                                     environment: ["ENCFS_LIBRARY": fixture.binDirectory + "/libencfs.so",
                                                   "PYTHONPATH": EmbedFixture.root + "/bindings/python"])
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertEqual(run.output, "ran while blocked: True\n")
    }
}
