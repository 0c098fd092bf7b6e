import EncFSCore

/// The HTML page of a directory's entries (`--list-directories` only):
/// names escaped for HTML, links percent-encoded byte by byte, so a name
/// with a newline or bytes that are not UTF-8 still has a working link.
enum DirectoryListing {
    /// Most entries listed: a directory of a million files would otherwise
    /// make one reply of tens of megabytes.
    static let maximumEntries = 10_000

    /// The page, nil when the index cannot be read.
    static func page(of directory: IndexEntry, in index: BundleIndex) -> [UInt8]? {
        var html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index</title></head><body><ul>\n"
        html += "<li><a href=\"../\">../</a></li>\n"
        for position in directory.children.prefix(maximumEntries) {
            guard let child = try? index.entry(at: position), let name = try? index.name(of: child) else { return nil }
            let suffix = child.kind == .directory ? "/" : ""
            html += "<li><a href=\"\(RequestTarget.percentEncoded(name))\(suffix)\">\(escaped(name))\(suffix)</a></li>\n"
        }
        html += "</ul></body></html>\n"
        return Array(html.utf8)
    }

    /// `name` as HTML text: markup characters as references, bytes that
    /// are not UTF-8 as U+FFFD (the link still has the exact bytes).
    static func escaped(_ name: [UInt8]) -> String {
        var out = ""
        for scalar in String(decoding: name, as: UTF8.self).unicodeScalars {
            switch scalar {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\n": out += "&#10;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
