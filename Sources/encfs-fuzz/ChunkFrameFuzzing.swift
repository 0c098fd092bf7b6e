import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// The `chunk-frame` target: a zstd frame as a key holder could seal it
/// into a chunk, inflated the way the reader does.
///
/// Input framing:
/// ```
/// 0  1  chunk length = 2^(12 + byte % 9) − byte / 9 (a full chunk of 4 KiB … 1 MiB, or a shorter last one)
/// 1  …  the frame
/// ```
/// The decompressor must accept only a frame that inflates to exactly the
/// chunk length and never write past it (the bytes after the chunk are a
/// guard that must stay intact); whatever it accepts, compressing the
/// inflated bytes again and inflating that must give them back.
enum ChunkFrameFuzzing {
    /// Bytes after the chunk that must stay untouched.
    static let guardSize = 64
    static let guardByte: UInt8 = 0xA5

    nonisolated(unsafe) static var decompressor: ChunkDecompressor?
    nonisolated(unsafe) static var compressor: ChunkCompressor?

    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 1 else { return }
        let length = (1 << (12 + Int(input[0] % 9))) - Int(input[0] / 9)
        guard let decompressor = FuzzTarget.attempt("ChunkDecompressor()", { try decompressor ?? ChunkDecompressor() }),
              let compressor = FuzzTarget.attempt("ChunkCompressor()", { try compressor ?? ChunkCompressor(level: 1) }) else { return }
        Self.decompressor = decompressor
        Self.compressor = compressor
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: length + guardSize, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: guardByte)
        let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
        let inflated = decompressor.decompress(UnsafeRawBufferPointer(rebasing: input[1...]), into: chunk)
        FuzzTarget.require(buffer[length...].allSatisfy { $0 == guardByte }, "the decompressor wrote past the chunk")
        guard inflated else { return }
        // Round trip what was accepted.
        let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 16)
        let again = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 16)
        defer {
            frame.deallocate()
            again.deallocate()
        }
        guard let n = compressor.compress(UnsafeRawBufferPointer(chunk), into: frame) else { return }
        FuzzTarget.require(decompressor.decompress(UnsafeRawBufferPointer(rebasing: frame[0..<n]), into: again),
                           "a frame the compressor made does not inflate")
        FuzzTarget.require(chunk.elementsEqual(again), "a compression round trip changed the bytes")
    }
}
