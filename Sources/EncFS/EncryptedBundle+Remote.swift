import EncFSRemote
#if canImport(Glibc)
import Glibc
#endif

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
        try self.init(source: try Self.remoteSource(Array(url.utf8), options: options), unlock: unlock)
    }

    /// Opens the remote source at `address`. A failure of the server (or
    /// of the way to it) names the address as shown
    /// (``RemoteLocation/displayName``: no query string, `s3://bucket/key`)
    /// with the server's answer, so that an application's one line says
    /// which bundle and why.
    ///
    /// - Throws: `.io` with `EIO` for the server's refusal or silence;
    ///   as ``init(source:unlock:verifyingSignatureWith:)`` otherwise.
    package static func remoteSource(_ address: [UInt8], options: RemoteOptions) throws(EncryptedBundleError) -> RemoteBundleSource {
        let location = try perform([]) { try RemoteLocation(address) }
        do {
            return try RemoteBundleSource(location: location, options: options)
        } catch let error as RemoteError {
            throw .io(errno: EIO, what: "open \(String(decoding: location.displayName, as: UTF8.self)) (\(error))")
        } catch {
            throw EncryptedBundleError(error, path: [])
        }
    }
}
