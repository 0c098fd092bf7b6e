/// An `http://`, `https://` or `s3://BUCKET/KEY` address of a bundle, and
/// how to show it.
///
/// An `s3://` address becomes the https (or the endpoint's http) address
/// of the object, path-style or virtual-hosted (``S3Settings``), whose
/// requests are signed with AWS Signature V4 for ``signingRegion``; it is
/// shown as `s3://bucket/key`.
///
/// The query string (a presigned URL's signature) and any user information
/// are secrets: ``displayName`` keeps only scheme, host and path, and says
/// `?…` where a query was. The full text is handed to libcurl and nowhere
/// else.
package struct RemoteLocation: Sendable, Equatable {
    /// The address as given, secrets included.
    package let url: [UInt8]
    /// `scheme://host/path`, then `?…` when the address has a query.
    package let displayName: [UInt8]
    /// The region an `s3://` address's requests are signed for; nil for
    /// an http(s) address (not signed).
    package let signingRegion: String?

    /// Whether `text` looks like an address this type accepts (a bundle
    /// path never starts with `http://`, `https://` or `s3://`).
    package static func isRemote(_ text: [UInt8]) -> Bool {
        let lower = text.prefix(8).map { $0 | 0x20 }
        return lower.starts(with: Array("http://".utf8)) || lower.starts(with: Array("https://".utf8)) || isS3(text)
    }

    /// Whether `text` is an `s3://` address.
    package static func isS3(_ text: [UInt8]) -> Bool {
        text.prefix(5).map { $0 | 0x20 } == Array("s3://".utf8)
    }

    /// Parses `url`.
    ///
    /// - Throws: `RemoteError.invalidURL` for another scheme, no host, or
    ///   control bytes or spaces (which libcurl would send as they are).
    package init(_ url: [UInt8], s3: S3Settings = S3Settings()) throws(RemoteError) {
        if Self.isS3(url) {
            self = try Self(s3: url, settings: s3)
            return
        }
        guard Self.isRemote(url) else { throw .invalidURL("only http://, https:// and s3:// addresses are accepted") }
        guard url.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { throw .invalidURL("the address contains spaces or control characters") }
        guard let schemeEnd = url.firstIndex(of: UInt8(ascii: ":")) else { throw .invalidURL("no scheme") }
        let afterScheme = url[(schemeEnd + 3)...]
        let authorityEnd = afterScheme.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? url.endIndex
        var authority = url[afterScheme.startIndex..<authorityEnd]
        // user:password@host: the user information is a secret too.
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        guard !authority.isEmpty else { throw .invalidURL("no host") }
        let rest = url[authorityEnd...]
        let pathEnd = rest.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? url.endIndex
        var shown = Array(url[url.startIndex..<(schemeEnd + 3)]) + Array(authority) + Array(url[authorityEnd..<pathEnd])
        if pathEnd < url.endIndex { shown += Array("?…".utf8) }
        self.url = url
        displayName = shown
        signingRegion = nil
    }

    /// `s3://BUCKET/KEY` with `settings`.
    private init(s3 address: [UInt8], settings: S3Settings) throws(RemoteError) {
        let rest = address.dropFirst(5)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { throw .invalidURL("an s3:// address is s3://BUCKET/KEY") }
        let bucket = Array(rest[..<slash])
        let key = Array(rest[(slash + 1)...])
        // S3's bucket naming rules: 3 to 63 lowercase letters, digits,
        // dots and hyphens.
        guard (3...63).contains(bucket.count), bucket.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0)
            || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }) else {
            throw .invalidURL("the bucket name must be 3 to 63 lowercase letters, digits, dots or hyphens")
        }
        guard !key.isEmpty, key.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw .invalidURL("the object key is empty or contains spaces or control characters")
        }
        let region = settings.resolvedRegion
        guard !region.isEmpty, region.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") }) else {
            throw .invalidURL("the region must be lowercase letters, digits and hyphens (e.g. eu-west-1)")
        }
        url = try settings.address(bucket: bucket, key: key, region: region)
        displayName = Array("s3://".utf8) + bucket + [UInt8(ascii: "/")] + key
        signingRegion = region
    }
}
