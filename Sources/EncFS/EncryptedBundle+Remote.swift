import EncFSRemote

extension EncryptedBundle {
    /// Opens the bundle at an `http://` or `https://` address, reading it
    /// with range requests as the application reads files (what
    /// `encfs-mount URL` does, without FUSE).
    ///
    /// The server is not trusted: every chunk is authenticated as it is
    /// read. The address's query string and `options.headers` are secrets:
    /// errors name the address as `scheme://host/path?…`. Without
    /// `options.cacheDirectory` (the default here) nothing is written to
    /// disk; with one, fetched ciphertext is cached there.
    ///
    /// - Parameters:
    ///   - url: the address (a presigned URL works as it is).
    ///   - unlock: the secret that opens one of its key slots.
    ///   - options: connections, timeouts, headers, cache (``RemoteOptions``).
    /// - Throws: as ``init(source:unlock:verifyingSignatureWith:)``; `.io` with the server's
    ///   answer when it cannot be read (refused, not a range server,
    ///   replaced, out of time).
    public convenience init(url: String, unlock: Unlock, options: RemoteOptions = RemoteOptions()) throws(EncryptedBundleError) {
        let source = try Self.perform([]) { () throws -> any ByteSource in
            try RemoteBundleSource(location: try RemoteLocation(Array(url.utf8)), options: options)
        }
        try self.init(source: source, unlock: unlock)
    }
}
