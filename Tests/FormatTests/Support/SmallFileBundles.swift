import CryptCore
@testable import EncFSCore
import SharedTestSupport
import XCTest

/// Bundles of many small source files packed into fragment units: what the
/// unit cache and workspace tests read.
enum SmallFileBundles {
    /// Packs `files` (name, bytes; names may be under `s/`) in `tmp` with
    /// zstd, 4 KiB chunks and 64 KiB fragment units; fails the test on any
    /// packing warning.
    ///
    /// - Returns: the bundle's path.
    static func pack(_ files: [(String, [UInt8])], in tmp: TemporaryDirectory, key: SymmetricKey) throws -> [UInt8] {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        try FileTree.makeDirectory(join(source, bytes("s")))
        for (file, data) in files { try FileTree.writeFile(join(source, bytes(file)), data) }
        let path = tmp.appending("b.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.fragmentUnitLog2 = 16
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = .zstd
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return path
    }

    /// `count` source-like files `s/f000.c` …, of `base` + 13 × (i mod 97)
    /// bytes each.
    static func files(_ count: Int, base: Int) -> [(String, [UInt8])] {
        (0..<count).map { ("s/f\(String(format: "%03d", $0)).c", CompressibleData.sourceText(base + 13 * ($0 % 97), seed: UInt64($0))) }
    }
}
