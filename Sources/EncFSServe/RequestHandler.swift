import EncFSCore
import EncFSService

/// Decides the reply to one request: the whole of HTTP as encfs-serve
/// speaks it, apart from the wire (libmicrohttpd, ``HTTPEndpoint``).
///
/// The order of the checks is part of the defence: the `Host` header
/// first (421: a page of another origin that rebinds its DNS name to
/// 127.0.0.1 names its own host), then the token (404 without a hint,
/// whatever the method or path), then the method (405), then whether the
/// bundle is locked (503, no hint), then the path.
///
/// It keeps no reader: the one of ``LockableBundle`` comes with each
/// request, so that a lock leaves nothing here to wipe.
final class RequestHandler: Sendable {
    let settings: ServeSettings
    let types: ContentTypes

    // Made once: an `Array("GET".utf8)` in a comparison is an allocation
    // per request.
    private static let get = Array("GET".utf8)
    private static let head = Array("HEAD".utf8)
    private static let bearerPrefix = Array("Bearer ".utf8)

    init(settings: ServeSettings, types: ContentTypes) {
        self.settings = settings
        self.types = types
    }

    /// The reply to `method` on `target` (the request target as sent),
    /// with `header` looking up request headers by name; `reader` is nil
    /// while the bundle is locked.
    func reply(reader: BundleReader?, method: [UInt8], target: [UInt8], hosts: HostCheck, header: (String) -> [UInt8]?) -> Reply {
        guard hosts.admits(header("Host")) else { return Reply(421) }
        let bearer = settings.token.map { token in
            guard let value = header("Authorization"), value.count == token.count + 7,
                  value.prefix(7).elementsEqual(Self.bearerPrefix) else { return false }
            return RequestTarget.constantTimeEqual(value[7...], token)
        } ?? false
        let mapped = RequestTarget.map(target, token: settings.token, bearer: bearer)
        if case .unauthorized = mapped { return Reply(404) }
        let isHead = method == Self.head
        guard isHead || method == Self.get else { return Reply(405, headers: [("Allow", "GET, HEAD")]) }
        guard let reader else { return Reply(503) }
        switch mapped {
        case .unauthorized: return Reply(404)
        case .malformed: return Reply(400)
        case .tokenRoot: return Reply(301, headers: [("Location", String(decoding: target, as: UTF8.self) + "/")])
        case .path(let path, let trailingSlash):
            return reply(reader, path: path, trailingSlash: trailingSlash, target: target, header: header)
        }
    }

    /// The reply for a path inside the bundle.
    private func reply(_ reader: BundleReader, path: [UInt8], trailingSlash: Bool, target: [UInt8], header: (String) -> [UInt8]?) -> Reply {
        let index = reader.index
        guard let entry = resolved(path, in: reader) else { return Reply(404) }
        switch entry.kind {
        case .file:
            guard !trailingSlash else { return Reply(404) }
            let name = (try? index.name(of: entry)) ?? []
            return fileReply(entry, name: name, bundleID: reader.header.bundleID, header: header)
        case .directory:
            guard trailingSlash else {
                return Reply(301, headers: [("Location", String(decoding: target, as: UTF8.self) + "/")])
            }
            if let indexName = settings.index, let page = resolved(path + [UInt8(ascii: "/")] + indexName, in: reader),
               page.kind == .file {
                return fileReply(page, name: indexName, bundleID: reader.header.bundleID, header: header)
            }
            guard settings.listsDirectories, let page = DirectoryListing.page(of: entry, in: index) else { return Reply(404) }
            return Reply(200, headers: commonHeaders + [("Content-Type", "text/html; charset=utf-8")], body: .bytes(page))
        default:
            return Reply(404)
        }
    }

    /// The entry at `path`, symlinks followed inside the bundle only (as
    /// the mount: `SymlinkContainment`); nil for anything not there or
    /// not reachable.
    private func resolved(_ path: [UInt8], in reader: BundleReader) -> IndexEntry? {
        try? reader.index.resolve(path: path, followingLast: true)
    }

    /// Headers every successful reply carries.
    private var commonHeaders: [(String, String)] {
        [("X-Content-Type-Options", "nosniff"), ("Cache-Control", settings.cacheControl)]
    }

    /// A file's reply: conditions (304), ranges (206, 416) and the body.
    ///
    /// The ETag starts with the first 8 bytes of the bundle id in hex: it
    /// names the bundle as well as the file, so a replaced bundle never
    /// answers 304.
    private func fileReply(_ entry: IndexEntry, name: [UInt8], bundleID: [UInt8], header: (String) -> [UInt8]?) -> Reply {
        let size = entry.fileSize
        let tag = "\"\(Hex.encode(Array(bundleID.prefix(8))))-\(entry.position)-\(size)-\(entry.mtimeSeconds)\""
        let modified = HTTPDate.format(entry.mtimeSeconds)
        // Room for every header of a 206: one allocation.
        var headers: [(String, String)] = []
        headers.reserveCapacity(7)
        headers += commonHeaders
        headers.append(("ETag", tag))
        headers.append(("Last-Modified", modified))
        if let condition = header("If-None-Match") {
            if Self.matches(condition, tag: tag) { return Reply(304, headers: headers) }
        } else if let since = header("If-Modified-Since").flatMap(HTTPDate.parse), entry.mtimeSeconds <= since {
            return Reply(304, headers: headers)
        }
        headers.append(("Content-Type", types.type(ofName: name)))
        headers.append(("Accept-Ranges", "bytes"))
        var range = header("Range")
        if let condition = header("If-Range"), condition != Array(tag.utf8), condition != Array(modified.utf8) {
            range = nil
        }
        switch ByteRangeRequest.parse(range, size: size) {
        case .whole:
            return Reply(200, headers: headers, body: .file(entry, start: 0, length: size))
        case .single(let start, let length):
            headers.append(("Content-Range", "bytes \(start)-\(start + length - 1)/\(size)"))
            return Reply(206, headers: headers, body: .file(entry, start: start, length: length))
        case .unsatisfiable:
            return Reply(416, headers: [("Content-Range", "bytes */\(size)")] + commonHeaders)
        }
    }

    /// Whether an `If-None-Match` list names `tag` (weak comparison:
    /// `W/` ignored) or is `*`.
    static func matches(_ condition: [UInt8], tag: String) -> Bool {
        let wanted = Array(tag.utf8)
        for item in condition.split(separator: UInt8(ascii: ",")) {
            var value = item.drop { $0 == 0x20 || $0 == 0x09 }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            if value.elementsEqual([UInt8(ascii: "*")]) { return true }
            if value.starts(with: Array("W/".utf8)) { value = value.dropFirst(2) }
            if value.elementsEqual(wanted) { return true }
        }
        return false
    }
}
