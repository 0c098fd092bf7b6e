import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// The `bundle` target: the input is a whole bundle file, opened with the
/// fixed raw key, and again requiring the fixed signer's signature.
///
/// The input is written to a file under /dev/shm (the reader works on a
/// descriptor, as the mount does) and opened; whatever opens has its index
/// walked and every file read in full, then again at offsets around the
/// chunk boundaries and the end. Every read must return the same bytes as
/// the full read at that offset, or fail: a mutated chunk may give EIO,
/// never other bytes.
enum BundleFuzzing {
    /// The scratch file, one per process.
    static let path = "/dev/shm/encfs-fuzz-\(getpid()).bundle"

    static func run(_ input: UnsafeRawBufferPointer) {
        write(input)
        guard let reader = FuzzTarget.attempt("BundleReader.open", {
            try BundleReader.open(path: Array(path.utf8), materials: [.rawKey(FuzzSecrets.rawKey)])
        }) else { return }
        FuzzTarget.require(reader.bundleSize == UInt64(input.count), "bundle size differs from the file's")
        checkSignature(of: reader)
        IndexFuzzing.walk(reader.index)
        for position in 0..<reader.index.count {
            guard let entry = FuzzTarget.attempt("entry(at:)", { try reader.index.entry(at: position) }),
                  entry.kind == .file else { continue }
            read(entry, of: reader)
        }
    }

    /// Reads `entry` whole, then at offsets around each boundary, checking
    /// that every read agrees with the whole one (with the part of it read
    /// before a damaged chunk stopped it).
    private static func read(_ entry: IndexEntry, of reader: BundleReader) {
        guard let key = FuzzTarget.attempt("fileKey", { try reader.fileKey(for: entry) }) else { return }
        // Sizes come from the authenticated index, and validation keeps each
        // file's chunks inside the bundle: `size` is below the input length.
        let size = Int(entry.fileSize)
        var whole = [UInt8](repeating: 0, count: size)
        let step = 65536 + 3
        var offset = 0 // whole[0 ..< offset] has been read and authenticated
        while offset < size {
            let count = min(step, size - offset)
            let got = FuzzTarget.attempt("read") {
                try whole.withUnsafeMutableBytes {
                    try reader.read(entry, key: key, fromOffset: UInt64(offset), into: UnsafeMutableRawBufferPointer(rebasing: $0[offset..<(offset + count)]))
                }
            }
            guard let got else { break }
            FuzzTarget.require(got == count, "read of \(count) bytes at \(offset) of \(size) returned \(got)")
            offset += count
        }
        let chunk = Int(reader.header.layout.chunkSize)
        let offsets = [0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk + 7, size - 1, size, size + 1, Int.max]
        var buffer = [UInt8](repeating: 0, count: 2 * chunk + 5)
        for start in offsets where start >= 0 {
            for count in [1, 17, buffer.count] {
                let got = FuzzTarget.attempt("read") {
                    try buffer.withUnsafeMutableBytes {
                        try reader.read(entry, key: key, fromOffset: UInt64(start), into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]))
                    }
                }
                guard let got else { continue }
                let expected = start >= size ? 0 : min(count, size - start)
                FuzzTarget.require(got == expected, "read of \(count) bytes at \(start) of \(size) returned \(got)")
                if got > 0, start + got <= offset {
                    FuzzTarget.require(buffer[0..<got].elementsEqual(whole[start..<(start + got)]),
                                       "read at \(start) returned other bytes than the whole read")
                }
            }
        }
    }

    /// Opens the input again requiring the fixed signer: what opens so is
    /// the same bundle, and its chunks are verified against the signature
    /// (which may say they differ, never trap).
    private static func checkSignature(of reader: BundleReader) {
        guard reader.header.signatureSlot != nil, let signed = FuzzTarget.attempt("BundleReader.open signed", {
            try BundleReader.open(path: Array(path.utf8), materials: [.rawKey(FuzzSecrets.rawKey)], options: OpenOptions(origin: FuzzSecrets.origin))
        }) else { return }
        FuzzTarget.require(signed.header.bundleID == reader.header.bundleID && signed.index.count == reader.index.count,
                           "the signed open read another bundle")
        guard let report = FuzzTarget.attempt("BundleVerifier.verify", { try BundleVerifier.verify(signed) }) else { return }
        FuzzTarget.attempt("matchesSignature") { _ = try report.matchesSignature(of: signed.header) }
    }

    /// Replaces the scratch file's contents with `input`.
    private static func write(_ input: UnsafeRawBufferPointer) {
        let file: FileDescriptor
        do { file = try FileDescriptor.open(Array(path.utf8), flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600) } catch {
            FuzzTarget.finding("cannot create the scratch bundle (errno \(error.errno))")
        }
        do { try file.writeAll(input) } catch {
            FuzzTarget.finding("cannot write the scratch bundle (errno \(error.errno))")
        }
    }

    /// Removes the scratch file.
    static func cleanUp() {
        unlink(path)
    }
}
