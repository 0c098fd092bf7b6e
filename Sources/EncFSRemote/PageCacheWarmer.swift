import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads a cached unit file into the kernel's page cache ahead of a
/// sequential reader, in large folios and without copying its bytes.
///
/// Why not `posix_fadvise(POSIX_FADV_WILLNEED)`: the kernel fills that
/// range one 4 KiB page at a time (`force_page_cache_ra`), where a local
/// bundle's sequential reader gets large folios from the on-demand
/// read-ahead; on a warm remote read that fill was most of the daemon's
/// extra CPU against a local mount (docs/PERFORMANCE.md, remote bundles).
/// Reading the unit with `pread` instead cost more in copying than it
/// saved.
///
/// How, cheapest first:
/// - the file mapped with `MADV_HUGEPAGE` and one page of every 2 MiB
///   faulted in with `MADV_POPULATE_READ`: the fault's read-ahead fills
///   the page cache in 2 MiB folios at once (`do_sync_mmap_readahead`),
///   and nothing but those few pages is mapped. `MADV_POPULATE_READ`
///   reports a file cut short as an error (no `SIGBUS`: the cache
///   directory is not trusted).
/// - `sendfile` of the file to `/dev/null` (kernels or file systems that
///   refuse the first): the on-demand read-ahead of a sequential reader,
///   whose folios start small in each file, and splice's handling of
///   every page.
///
/// ``warm(_:count:)`` returns once the bytes are in the page cache (it
/// waits for the disk): call it off the reader's thread.
struct PageCacheWarmer: Sendable {
    /// `/dev/null`, open for writing.
    private let sink: FileDescriptor
    /// The size of a PMD-mapped huge page, the largest folio the fault's
    /// read-ahead makes.
    private static let hugePage = 2 << 20
    /// `MADV_POPULATE_READ` (Linux 5.14), not exported by Glibc's module.
    private static let populateRead: Int32 = 22

    /// Opens `/dev/null`; nil when it cannot be opened (then the caller
    /// falls back to `posix_fadvise`).
    init?() {
        guard let sink = try? FileDescriptor.open(Array("/dev/null".utf8), flags: O_WRONLY) else { return nil }
        self.sink = sink
    }

    /// Reads bytes `0..<count` of `file` into the page cache.
    ///
    /// - Returns: false when neither way worked (then the caller advises).
    func warm(_ file: FileDescriptor, count: Int) -> Bool {
        count <= 0 || faultInHugePages(file, count: count) || send(file, count: count)
    }

    /// Maps `file` with huge pages advised and faults in one page every
    /// ``hugePage`` bytes. The corresponding C functions are `mmap` and
    /// `madvise`.
    private func faultInHugePages(_ file: FileDescriptor, count: Int) -> Bool {
        guard let map = mmap(nil, count, PROT_READ, MAP_SHARED, file.rawValue, 0), map != MAP_FAILED else { return false }
        defer { munmap(map, count) }
        guard madvise(map, count, MADV_HUGEPAGE) == 0 else { return false }
        for offset in stride(from: 0, to: count, by: Self.hugePage) {
            guard madvise(map + offset, 1, Self.populateRead) == 0 else { return false }
        }
        return true
    }

    /// Sends `file` to `/dev/null`. The corresponding C function is
    /// `sendfile`.
    ///
    /// - Returns: false when the kernel refused before reading anything.
    private func send(_ file: FileDescriptor, count: Int) -> Bool {
        var offset: off_t = 0
        let end = off_t(clamping: count)
        while offset < end {
            let sent = SystemCall.retryingInterrupts { sendfile(sink.rawValue, file.rawValue, &offset, Int(end - offset)) }
            if sent > 0 { continue }
            // 0: the file ended early (the reader finds out and drops it).
            return sent == 0 || offset > 0
        }
        return true
    }
}
