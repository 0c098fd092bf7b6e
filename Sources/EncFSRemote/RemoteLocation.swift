/// An `http://` or `https://` address of a bundle, and how to show it.
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

    /// Whether `text` looks like an address this type accepts (a bundle
    /// path never starts with `http://` or `https://`).
    package static func isRemote(_ text: [UInt8]) -> Bool {
        let lower = text.prefix(8).map { $0 | 0x20 }
        return lower.starts(with: Array("http://".utf8)) || lower.starts(with: Array("https://".utf8))
    }

    /// Parses `url`.
    ///
    /// - Throws: `RemoteError.invalidURL` for another scheme, no host, or
    ///   control bytes or spaces (which libcurl would send as they are).
    package init(_ url: [UInt8]) throws(RemoteError) {
        guard Self.isRemote(url) else { throw .invalidURL("only http:// and https:// addresses are accepted") }
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
    }
}
