import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads a cached unit file into the kernel's page cache ahead of a
/// sequential reader, through the kernel's own read-ahead and without
/// copying its bytes anywhere.
///
/// Why not `posix_fadvise(POSIX_FADV_WILLNEED)`: the kernel fills that
/// range one 4 KiB page at a time (`force_page_cache_ra`), where a
/// sequential reader's read-ahead fills it in large folios; on a warm
/// remote read that fill was most of the daemon's extra CPU against a
/// local mount (docs/PERFORMANCE.md, remote bundles). `sendfile` from the
/// unit file to `/dev/null` reads the file like a sequential reader
/// (`filemap_splice_read`, the on-demand read-ahead) and `/dev/null`
/// drops the pages' references unread. Reading the unit with `pread`
/// instead cost more in copying than it saved.
///
/// ``warm(_:count:)`` returns once the bytes are in the page cache (it
/// waits for the disk): call it off the reader's thread.
struct PageCacheWarmer: Sendable {
    /// `/dev/null`, open for writing.
    private let sink: FileDescriptor

    /// Opens `/dev/null`; nil when it cannot be opened (then the caller
    /// falls back to `posix_fadvise`).
    init?() {
        guard let sink = try? FileDescriptor.open(Array("/dev/null".utf8), flags: O_WRONLY) else { return nil }
        self.sink = sink
    }

    /// Reads bytes `0..<count` of `file` into the page cache. The
    /// corresponding C function is `sendfile`.
    ///
    /// - Returns: false when the kernel refused before reading anything
    ///   (a file system that cannot splice): the caller advises instead.
    func warm(_ file: FileDescriptor, count: Int) -> Bool {
        var offset: off_t = 0
        let end = off_t(clamping: count)
        while offset < end {
            let sent = sendfile(sink.rawValue, file.rawValue, &offset, Int(end - offset))
            if sent > 0 { continue }
            if sent < 0, errno == EINTR { continue }
            // 0: the file ended early (the reader finds out and drops it).
            return sent == 0 || offset > 0
        }
        return true
    }
}
