/// How a remote bundle is fetched and cached: the `encfs-mount` and
/// `encfs-inspect` options for a URL, with the defaults of the issue.
///
/// The header lines are secrets (an `Authorization:` value): they travel to
/// the daemon through a pipe with the address, never through argv.
public struct RemoteOptions: Sendable, Equatable {
    /// What is fetched when the bundle is opened.
    public enum Prefetch: String, Sendable, CaseIterable {
        /// The index is not held in memory: it is read through the cache
        /// like content (the mount still reads it whole once, to check its
        /// tag, and again page by page as directories are listed).
        case none
        /// Header and the whole sealed index, kept in memory: listing a
        /// directory never waits for the network.
        case index
        /// The index, then every fetch unit in the background until the
        /// cache is full.
        case all
    }

    /// Cache directory (`--cache-dir`); nil: no disk cache.
    public var cacheDirectory: [UInt8]?
    /// Most bytes the cache keeps (`--cache-size`, default 4 GiB).
    public var cacheSize: UInt64 = 4 << 30
    /// About the bytes per cache file (`--fetch-size`, default 4 MiB): a
    /// unit is cut to (or, for a longer chunk, extended to) a chunk
    /// boundary (``RemoteBundleSource``).
    public var fetchSize: Int = 4 << 20
    /// Kept-alive connections (`--connections`, default 4).
    public var connections: Int = 4
    /// `--prefetch`, default `index`.
    public var prefetch: Prefetch = .index
    /// How long one read may wait for the network before EIO, in seconds
    /// (`--net-timeout`, default 60; 0 waits forever).
    public var netTimeout: Int = 60
    /// Most attempts after the first for one request (`--retries`), within
    /// the deadline.
    public var retries: Int = 10
    /// Certificate authorities to trust instead of the system's (`--ca-file`).
    public var caFile: [UInt8]?
    /// Extra request headers, `Name: value` each (`--header-file`): secret.
    public var headers: [[UInt8]] = []
    /// Most reads that may wait for the network at once; one more waits
    /// up to 2 s for a turn (a busy server frees one in milliseconds), then
    /// is refused with EIO (a stalled one frees none), so that worker
    /// threads stay free for cached data (the mount sets it below its
    /// thread count).
    public var maximumWaitingReads: Int = 64
    /// How `s3://` addresses are signed and sent (``S3Settings``).
    package var s3 = S3Settings()
    /// Other addresses of the same bundle (`--mirror`, in order), read
    /// from when the ones before them fail.
    package var mirrors: [[UInt8]] = []
    /// Files (and chunk ranges) fetched first, in the background, once the
    /// mount is open (`--prefetch-list`).
    package var prefetchList: [PrefetchItem]?

    public init() {}

    /// Reads `--header-file` contents: one `Name: value` per line; empty
    /// lines and lines starting with `#` are skipped; CR before LF dropped.
    ///
    /// - Throws: `RemoteError.setup` naming the line number only (never its
    ///   text, which is secret).
    package static func parseHeaders(_ text: [UInt8]) throws(RemoteError) -> [[UInt8]] {
        var headers: [[UInt8]] = []
        for (number, rawLine) in text.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            var line = Array(rawLine)
            if line.last == 0x0D { line.removeLast() }
            if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
                  line[..<colon].allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
                  line.allSatisfy({ $0 >= 0x20 || $0 == 0x09 }) else {
                throw .setup("header file line \(number + 1) is not \"Name: value\"")
            }
            headers.append(line)
        }
        return headers
    }
}
