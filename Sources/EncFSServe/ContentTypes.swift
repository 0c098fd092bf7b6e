import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// `Content-Type` by file extension: `/etc/mime.types` where present,
/// then a built-in table of the web's common types (for a container
/// without the file); `application/octet-stream` otherwise, which with
/// `nosniff` a browser will not render.
package struct ContentTypes: Sendable {
    private var byExtension: [[UInt8]: String] = [:]

    /// The built-in table, used for what /etc/mime.types does not name.
    static let builtIn: [(String, String)] = [
        ("html", "text/html"), ("htm", "text/html"), ("css", "text/css"), ("js", "text/javascript"),
        ("mjs", "text/javascript"), ("json", "application/json"), ("map", "application/json"),
        ("txt", "text/plain"), ("xml", "application/xml"), ("svg", "image/svg+xml"),
        ("png", "image/png"), ("jpg", "image/jpeg"), ("jpeg", "image/jpeg"), ("gif", "image/gif"),
        ("webp", "image/webp"), ("avif", "image/avif"), ("ico", "image/vnd.microsoft.icon"),
        ("woff", "font/woff"), ("woff2", "font/woff2"), ("ttf", "font/ttf"), ("otf", "font/otf"),
        ("wasm", "application/wasm"), ("pdf", "application/pdf"), ("mp4", "video/mp4"),
        ("webm", "video/webm"), ("mp3", "audio/mpeg"), ("ogg", "audio/ogg"), ("wav", "audio/wav"),
    ]

    /// Reads `mimeTypes` (one `type ext ext…` per line, `#` comments) when
    /// it can; a missing or unreadable file leaves the built-in table.
    package init(mimeTypes path: [UInt8] = Array("/etc/mime.types".utf8)) {
        if let text = Self.readSmallFile(path, limit: 1 << 20) {
            for line in text.split(separator: UInt8(ascii: "\n")) where line.first != UInt8(ascii: "#") {
                let words = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
                guard words.count > 1 else { continue }
                let type = String(decoding: words[0], as: UTF8.self)
                for word in words.dropFirst() where byExtension[Array(word)] == nil { byExtension[Array(word)] = type }
            }
        }
        for (ext, type) in Self.builtIn where byExtension[Array(ext.utf8)] == nil { byExtension[Array(ext.utf8)] = type }
    }

    /// The type of a file called `name` (its bytes after the last '.',
    /// compared in lower case).
    package func type(ofName name: [UInt8]) -> String {
        guard let dot = name.lastIndex(of: UInt8(ascii: ".")), dot + 1 < name.count else { return "application/octet-stream" }
        let ext = name[(dot + 1)...].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return byExtension[ext] ?? "application/octet-stream"
    }

    /// The whole of a small file, nil when it cannot be read or is larger
    /// than `limit`.
    static func readSmallFile(_ path: [UInt8], limit: Int) -> [UInt8]? {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_CLOEXEC) else { return nil }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count <= limit {
            let n = bytes.withUnsafeMutableBytes { try? file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[count...])) }
            guard let n else { return nil }
            if n == 0 { break }
            count += n
        }
        guard count <= limit else { return nil }
        return Array(bytes[..<count])
    }
}
