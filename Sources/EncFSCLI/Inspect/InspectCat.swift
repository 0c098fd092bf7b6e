import CryptCore
import EncFSCore

/// `encfs-inspect cat BUNDLE PATH`: writes a file's plaintext to stdout,
/// chunk by chunk, in bounded memory. Symlinks inside the bundle are
/// followed, as a shell would; one that points outside it is refused.
struct InspectCat: InspectSubcommand {
    static let operandCount = 2...2

    let bundle: InspectedBundle
    /// PATH inside the bundle.
    let path: [UInt8]

    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) {
        self.bundle = bundle
        path = operands[0]
    }

    func run(diagnostics: Diagnostics) throws -> Int32 {
        let reader = try bundle.open()
        let entry = try InspectedBundle.resolve(path, in: reader.index, followingLast: true)
        guard entry.kind == .file else { throw CommandError(BundleError.isADirectory.message, path: path) }
        let key = try reader.fileKey(for: entry)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(reader.header.layout.chunkSize) * 16, alignment: 4096)
        defer {
            SecureBytes.wipe(buffer)
            buffer.deallocate()
        }
        let out = OutputStream()
        var offset: UInt64 = 0
        while offset < entry.fileSize {
            let n = try reader.read(entry, key: key, fromOffset: offset, into: buffer)
            guard n > 0 else { break }
            try out.writeDirect(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += UInt64(n)
        }
        return ExitCode.success
    }
}
