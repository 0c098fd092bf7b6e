@testable import EncFSCore
import SharedTestSupport

/// Data the compressed-bundle tests build their cases from.
enum CompressibleData {
    /// Text like C source that zstd shrinks well, `n` bytes, the same for
    /// the same seed.
    static func sourceText(_ n: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        let words = ["int ", "struct ", "#define ", "return ", "x;\n", "/* c */ ", "{\n", "}\n"].map { Array($0.utf8) }
        var out: [UInt8] = []
        out.reserveCapacity(n + 16)
        while out.count < n { out += words[Int(generator.next() % UInt64(words.count))] }
        return Array(out[0..<n])
    }

    /// A zstd frame of exactly `frameLength` bytes that inflates past a
    /// 64 KiB chunk (a decompression bomb), or nil if none was found among
    /// tails of up to `tails` random bytes.
    ///
    /// Zeros inflate hugely; random bytes after them make the frame grow
    /// about one byte per byte, so some tail gives the exact length.
    static func bombFrame(length frameLength: Int, tails: Int) throws -> [UInt8]? {
        let compressor = try ChunkCompressor(level: 1)
        var generator = SeededGenerator(seed: 4)
        for tail in 0..<tails {
            let data = [UInt8](repeating: 0, count: 64 << 10) + generator.bytes(tail)
            var out = [UInt8](repeating: 0, count: data.count)
            let n = data.withUnsafeBytes { d in out.withUnsafeMutableBytes { compressor.compress(d, into: $0) } }
            if n == frameLength { return Array(out[0..<frameLength]) }
        }
        return nil
    }
}
