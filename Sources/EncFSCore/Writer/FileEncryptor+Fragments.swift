import CryptCore

extension FileEncryptor {
    /// Reads the whole of a small file into `space` (a fragment's free
    /// room), from the same consistent snapshot as ``encrypt(_:body:sink:hasher:)``.
    ///
    /// - Returns: the snapshot; its size is the bytes now at the start of
    ///   `space`.
    /// - Throws: `BundleError.sourceChanged` when the file no longer fits
    ///   in `capacity` bytes (it grew past the fragment size since the walk)
    ///   or changed while it was read, `.io`.
    func readSlice(_ source: Source, into space: UnsafeMutableRawBufferPointer) throws -> Snapshot {
        let (file, before) = try open(source)
        let size = Int(max(before.st_size, 0))
        guard size <= space.count else {
            throw BundleError.sourceChanged(path: source.displayPath, what: "file grew past the fragment size while it was packed")
        }
        let piece = UnsafeMutableRawBufferPointer(rebasing: space[0..<size])
        let got = try file.read(into: piece)
        guard got == size else { throw BundleError.sourceChanged(path: source.displayPath, what: "file shrank while it was read") }
        progress?.add(bytes: UInt64(size))
        prefetcher?.packerReached(file: source.sequence, offset: UInt64(size))
        return try checkUnchanged(file, since: before, source: source)
    }

    /// The key of a fragment's chunks: derived from its id as a file's key
    /// is from the file id (docs/SECURITY.md, "Fragments").
    func key(for body: FileBody) throws -> SymmetricKey {
        try body.fileID.withUnsafeBytes { try keys.fileKey(fileID: $0, using: keyDerivation) }
    }
}
