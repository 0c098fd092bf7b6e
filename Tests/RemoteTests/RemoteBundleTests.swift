import EncFS
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `EncryptedBundle(url:unlock:options:)`: a bundle packed by encfs-pack and
/// served by a real nginx on 127.0.0.1 (ranges and ETags, ``RemoteServer``),
/// read through the public API with no disk cache, and an error that names
/// the address without its query string.
final class RemoteBundleTests: ToolTestCase {
    /// Seeded file contents: `big.bin` spans many chunks, `docs/a.pdf` one.
    private let files: [String: Int] = ["big.bin": 300_000, "docs/a.pdf": 5_000]

    /// Packs ``files`` into the server's directory.
    ///
    /// - Returns: the bundle's path, its key file and the source tree.
    private func publish(on server: RemoteServer) throws -> (bundle: String, key: String, source: String) {
        let source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/docs")
        var generator = SeededGenerator(seed: 27)
        for (name, size) in files.sorted(by: { $0.key < $1.key }) {
            try scratch.write("src/\(name)", generator.bytes(size))
        }
        let key = try makeKeyFile()
        let bundle = "\(server.root)/app.encfs"
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "16K"])
        return (bundle, key, source)
    }

    func testOpenURL_ReadsLikeTheFile() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let (bundle, key, source) = try publish(on: server)
        let remote = try EncryptedBundle(url: server.url("app.encfs", query: "?X-Amz-Signature=abc"), unlock: .keyFile(key))
        let local = try EncryptedBundle(path: bundle, unlock: .keyFile(key))
        XCTAssertEqual(try remote.subpathsOfDirectory(atBytePath: []), try local.subpathsOfDirectory(atBytePath: []))
        for name in files.keys {
            let expected = try XCTUnwrap(FileManager.default.contents(atPath: "\(source)/\(name)"))
            XCTAssertEqual(try remote.contents(atPath: name), expected, name)
        }
        XCTAssertEqual(remote.bundleID, local.bundleID)
    }

    func testOpenURL_MissingObjectNamesAddressWithoutQuery() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let (_, key, _) = try publish(on: server)
        var options = RemoteOptions()
        options.netTimeout = 2
        XCTAssertThrowsError(try EncryptedBundle(url: server.url("gone.bundle", query: "?sig=s3cr3t"), unlock: .keyFile(key),
                                                 options: options)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("404"), text)
            XCTAssertFalse(text.contains("s3cr3t"), text)
        }
    }
}
