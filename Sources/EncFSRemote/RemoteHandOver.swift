/// What the mount command hands its daemon for a remote bundle, through a
/// pipe and never argv: the address (its query string may be a
/// signature), the extra headers (an `Authorization:` value), and what the
/// command's opening request pinned.
///
/// Encoding: each field as a 4-byte big-endian length then its bytes:
/// url, header count then each header, size (8 bytes, as a field), ETag
/// (a 0xFFFFFFFF length for none), head.
package struct RemoteHandOver: Sendable, Equatable {
    package var url: [UInt8]
    package var headers: [[UInt8]]
    package var pinned: HTTPByteSource.Pinned

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
        guard at == bytes.count else { throw .setup("malformed hand-over from the mount command") }
    }
}
