import CryptCore
import EncFSCore
import XCTest

/// Packs `source` into `destination` with the test scrypt cost, failing the
/// test on any warning (no test tree holds special files unless it says so).
@discardableResult
func packBundle(source: [UInt8], destination: [UInt8], chunkSizeLog2: UInt8 = 12, keys: [KeyMaterial],
                scrypt: Scrypt.Parameters = .testing, compression: CompressionMethod = .none,
                file: StaticString = #filePath, line: UInt = #line) throws -> PackSummary {
    var options = PackOptions()
    options.compression = compression
    options.chunkSizeLog2 = chunkSizeLog2
    options.keys = keys
    options.scrypt = scrypt
    return try BundleWriter.pack(source: source, destination: destination, options: options) { message, path in
        XCTFail("unexpected warning: \(message) (\(path.debugPath))", file: file, line: line)
    }
}
