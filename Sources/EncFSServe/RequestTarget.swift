/// What a request's path names inside the bundle, once the token is
/// checked: the one mapping from the request target libmicrohttpd hands
/// over (as sent, not decoded: `cmhd_unescape_nothing`) to bundle path
/// bytes. Pure, so the fuzz target (`encfs-fuzz serve-request`) and table
/// tests reach it without a server.
package enum RequestTarget: Equatable, Sendable {
    /// A path inside the bundle, percent-decoded once ('/'-separated,
    /// without the leading '/'), and whether the request ended with '/'.
    case path([UInt8], trailingSlash: Bool)
    /// The token prefix alone without its '/': a redirect to `TOKEN/`, so
    /// that relative URLs in the index page resolve under the prefix.
    case tokenRoot
    /// No token, or a wrong one: 404 without a hint.
    case unauthorized
    /// Not an origin-form path, a bad `%` escape, or `%00`: 400.
    case malformed

    /// Maps `target` (the request target as sent, without the query).
    ///
    /// - Parameters:
    ///   - token: the token every request must carry, nil with `--no-token`.
    ///   - bearer: whether `Authorization: Bearer` carried the token; the
    ///     path then needs no prefix (one is still stripped when present).
    package static func map(_ target: [UInt8], token: [UInt8]?, bearer: Bool) -> RequestTarget {
        guard target.first == slash else { return .malformed }
        var rest = target[1...]
        if let token {
            let end = rest.firstIndex(of: slash) ?? rest.endIndex
            let matches = constantTimeEqual(rest[rest.startIndex..<end], token)
            if matches {
                if end == rest.endIndex { return .tokenRoot }
                rest = rest[(end + 1)...]
            } else if !bearer {
                return .unauthorized
            }
        }
        guard let decoded = percentDecoded(rest) else { return .malformed }
        return .path(decoded, trailingSlash: rest.isEmpty || rest.last == slash)
    }

    /// `bytes` with each `%XX` replaced by its byte, once: nil for a `%`
    /// not followed by two hex digits and for `%00` (no name holds NUL).
    package static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == percent {
                guard bytes.endIndex - i >= 3,
                      let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else { return nil }
                let value = high << 4 | low
                guard value != 0 else { return nil }
                out.append(value)
                i += 3
            } else {
                guard byte != 0 else { return nil }
                out.append(byte)
                i += 1
            }
        }
        return out
    }

    /// `name` as one path segment of a URL: unreserved bytes as they are,
    /// every other byte (a '/', a newline, bytes that are not UTF-8) as
    /// `%XX`, so any name the bundle holds has an address.
    package static func percentEncoded(_ name: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        for byte in name {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(percent)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xf)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Compares in time that depends on the lengths only, not on where the
    /// bytes first differ.
    package static func constantTimeEqual(_ a: ArraySlice<UInt8>, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }

    private static let slash = UInt8(ascii: "/")
    private static let percent = UInt8(ascii: "%")
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }
}
