/// How encfs-serve answers, as its options set it.
struct ServeSettings: Sendable {
    /// The token every request carries (path prefix or bearer); nil with
    /// `--no-token` (unix sockets only).
    var token: [UInt8]?
    /// The page a directory serves (`--index NAME`, default `index.html`);
    /// nil with `--no-index`.
    var index: [UInt8]? = Array("index.html".utf8)
    /// `--list-directories`: a directory without an index page lists its
    /// entries (404 otherwise).
    var listsDirectories = false
    /// `Cache-Control` of every reply (`--cache-control`): `no-store`
    /// unless changed, because a browser's disk cache would otherwise
    /// write the plaintext to disk.
    var cacheControl = "no-store"
}
