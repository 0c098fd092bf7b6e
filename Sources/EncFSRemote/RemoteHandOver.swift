import CryptCore

/// What the mount command hands its daemon for a remote bundle, through a
/// pipe and never argv: the address (its query string may be a
/// signature), the extra headers (an `Authorization:` value), and what the
/// command's opening request pinned.
///
/// Encoding: each field as a 4-byte big-endian length then its bytes:
/// url, header count then each header, size (8 bytes, as a field), ETag
/// (a 0xFFFFFFFF length for none), head; then the AWS credentials of an
/// `s3://` address (key id, empty for none; secret key; session token or
/// none; the file they came from or none; its profile; one byte: 1 for a
/// config file) and the `--mirror` addresses (a count, then each: a
/// presigned mirror's query string is as secret as the address's), then
/// the object's last bytes (pinned for the mirrors), then the
/// `--prefetch-list` (a count; each: path, a range count, 8-byte bounds),
/// then which source answered the opening request (4 bytes: 0 for the
/// address, n for the n-th mirror).
package struct RemoteHandOver: Sendable, Equatable {
    package var url: [UInt8]
    package var headers: [[UInt8]]
    package var pinned: HTTPByteSource.Pinned
    /// The credentials an `s3://` address is signed with, and where they
    /// came from (the daemon reads that file again when it changes).
    package var credentials: AWSCredentials?
    package var credentialOrigin: AWSCredentialSource.Origin = .fixed
    package var mirrors: [[UInt8]] = []
    /// `--prefetch-list`, read by the command.
    package var prefetchList: [PrefetchItem] = []

    package init(url: [UInt8], headers: [[UInt8]], pinned: HTTPByteSource.Pinned) {
        self.url = url
        self.headers = headers
        self.pinned = pinned
    }

    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func length(_ n: UInt32) { withUnsafeBytes(of: n.bigEndian) { out += $0 } }
        func field(_ bytes: [UInt8]) {
            length(UInt32(bytes.count))
            out += bytes
        }
        field(url)
        length(UInt32(headers.count))
        headers.forEach(field)
        withUnsafeBytes(of: pinned.size.bigEndian) { out += $0 }
        if let etag = pinned.etag { field(etag) } else { length(.max) }
        field(pinned.head)
        field(credentials?.accessKeyID ?? [])
        field(credentials?.secretAccessKey.withUnsafeBytes { Array($0) } ?? [])
        if let token = credentials?.sessionToken { field(token.withUnsafeBytes { Array($0) }) } else { length(.max) }
        if case .file(let path, let profile, let configFile) = credentialOrigin {
            field(path)
            field(profile)
            out.append(configFile ? 1 : 0)
        } else {
            length(.max)
        }
        length(UInt32(mirrors.count))
        mirrors.forEach(field)
        field(pinned.tail)
        length(UInt32(prefetchList.count))
        for item in prefetchList {
            field(item.path)
            length(UInt32(item.chunks.count))
            for chunks in item.chunks {
                withUnsafeBytes(of: chunks.lowerBound.bigEndian) { out += $0 }
                withUnsafeBytes(of: chunks.upperBound.bigEndian) { out += $0 }
            }
        }
        length(UInt32(pinned.source))
        return out
    }

    /// Decodes what ``encoded()`` wrote.
    ///
    /// - Throws: `RemoteError.setup` for anything truncated or malformed.
    package init(decoding bytes: [UInt8]) throws(RemoteError) {
        var at = 0
        func take(_ n: Int) throws(RemoteError) -> ArraySlice<UInt8> {
            guard n >= 0, n <= bytes.count - at else { throw .setup("truncated hand-over from the mount command") }
            defer { at += n }
            return bytes[at..<(at + n)]
        }
        func number(_ width: Int) throws(RemoteError) -> UInt64 {
            try take(width).reduce(0) { $0 << 8 | UInt64($1) }
        }
        func field() throws(RemoteError) -> [UInt8] { Array(try take(Int(try number(4)))) }
        url = try field()
        let count = try number(4)
        guard count <= 4096 else { throw .setup("malformed hand-over from the mount command") }
        var headers: [[UInt8]] = []
        for _ in 0..<count { headers.append(try field()) }
        self.headers = headers
        let size = try number(8)
        let etagLength = try number(4)
        let etag = etagLength == UInt64(UInt32.max) ? nil : Array(try take(Int(etagLength)))
        pinned = HTTPByteSource.Pinned(size: size, etag: etag, head: try field())
        let keyID = try field()
        let secret = try field()
        defer { secret.withUnsafeBytes { SecureBytes.wipe(UnsafeMutableRawBufferPointer(mutating: $0)) } }
        let tokenLength = try number(4)
        let token = tokenLength == UInt64(UInt32.max) ? nil : Array(try take(Int(tokenLength)))
        defer { token?.withUnsafeBytes { SecureBytes.wipe(UnsafeMutableRawBufferPointer(mutating: $0)) } }
        if !keyID.isEmpty {
            credentials = AWSCredentials(accessKeyID: keyID, secretAccessKey: SecureBytes(copying: secret),
                                         sessionToken: token.map { SecureBytes(copying: $0) })
        }
        let pathLength = try number(4)
        if pathLength != UInt64(UInt32.max) {
            let path = Array(try take(Int(pathLength)))
            credentialOrigin = .file(path: path, profile: try field(), configFile: try number(1) == 1)
        }
        let mirrorCount = try number(4)
        guard mirrorCount <= 64 else { throw .setup("malformed hand-over from the mount command") }
        for _ in 0..<mirrorCount { mirrors.append(try field()) }
        pinned.tail = try field()
        let items = try number(4)
        guard items <= 1 << 20 else { throw .setup("malformed hand-over from the mount command") }
        for _ in 0..<items {
            let path = try field()
            let ranges = try number(4)
            guard ranges <= 1 << 20 else { throw .setup("malformed hand-over from the mount command") }
            var chunks: [Range<UInt64>] = []
            for _ in 0..<ranges {
                let lower = try number(8)
                let upper = try number(8)
                guard lower <= upper else { throw .setup("malformed hand-over from the mount command") }
                chunks.append(lower..<upper)
            }
            prefetchList.append(PrefetchItem(path: path, chunks: chunks))
        }
        let source = try number(4)
        guard source <= mirrorCount else { throw .setup("malformed hand-over from the mount command") }
        pinned.source = Int(source)
        guard at == bytes.count else { throw .setup("malformed hand-over from the mount command") }
    }
}
