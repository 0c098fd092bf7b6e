#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Best-effort `mlock` for secret buffers, safe for buffers that share pages.
///
/// `mlock` works on whole pages and does not count: one `munlock` unlocks a
/// page however many buffers locked it. A buffer that does not start and end
/// on page boundaries shares its first and last pages with whatever the
/// allocator put next to it, possibly another locked secret; unlocking the
/// first buffer's pages when it is freed would silently unlock the other.
///
/// So the pages a buffer covers only in part are counted here, process-wide:
/// `unlock` leaves a shared page locked while another locked buffer still
/// covers it. Pages a buffer covers entirely belong to it alone while it is
/// alive, and need no count. Every lock and unlock of a buffer in CryptCore
/// and through ``SecureMemory`` goes through this type; memory locked by
/// other means (OpenSSL's secure heap, which owns its own mapping) never
/// shares a page with these buffers.
///
/// Rule for callers: each successful `lock` of a buffer is paired with one
/// `unlock` of the same buffer, before the buffer is freed.
enum MemoryLock {
    /// The system page size.
    static let pageSize: Int = {
        let size = sysconf(Int32(_SC_PAGESIZE))
        return size > 0 ? Int(size) : 4096
    }()

    /// How many locked buffers cover each partly covered page, by page
    /// address. Held across the `mlock`/`munlock` calls, so a page cannot be
    /// unlocked between another buffer's count and its `mlock`.
    private static let partialPageLocks = Mutex<[UInt: Int]>([:])

    /// Locks the pages of `buffer`; returns false (and records that a warning
    /// is due) when `RLIMIT_MEMLOCK` does not allow it. The corresponding C
    /// function is `mlock`.
    static func lock(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return false }
        let span = PageSpan(buffer)
        let locked = partialPageLocks.withLock { counts -> Bool in
            guard mlock(base, buffer.count) == 0 else { return false }
            for page in span.partialPages { counts[page, default: 0] += 1 }
            return true
        }
        if !locked { SecureMemoryStatus.recordLockFailure() }
        return locked
    }

    /// Unlocks the pages of `buffer` (locked by ``lock(_:)``) that no other
    /// locked buffer still covers. The corresponding C function is `munlock`.
    static func unlock(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.baseAddress != nil, buffer.count > 0 else { return }
        let span = PageSpan(buffer)
        partialPageLocks.withLock { counts in
            var first = span.firstPage
            var last = span.lastPage
            for page in span.partialPages {
                let others = (counts[page] ?? 1) - 1
                counts[page] = others > 0 ? others : nil
                guard others > 0 else { continue }
                // Still covered by another locked buffer: keep it locked.
                // (No page starts at address 0, so `last` cannot wrap.)
                if page == first { first += UInt(pageSize) }
                if page == last { last -= UInt(pageSize) }
            }
            guard first <= last, let start = UnsafeRawPointer(bitPattern: first) else { return }
            _ = munlock(start, Int(last - first) + pageSize)
        }
    }

    /// Locked partial pages right now (for tests).
    static var partialPageCount: Int { partialPageLocks.withLock { $0.count } }
}

/// The pages a buffer touches, and which of them it covers only in part.
private struct PageSpan {
    /// Address of the first and last page touched.
    let firstPage: UInt
    let lastPage: UInt
    /// The first and/or last page when the buffer does not cover it whole
    /// (one entry when both are the same page).
    let partialPages: [UInt]

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        let pageSize = UInt(MemoryLock.pageSize)
        let start = UInt(bitPattern: buffer.baseAddress)
        let end = start + UInt(buffer.count) // one past the last byte
        firstPage = start & ~(pageSize - 1)
        lastPage = (end - 1) & ~(pageSize - 1)
        var partial: [UInt] = []
        if start != firstPage || end < firstPage + pageSize { partial.append(firstPage) }
        if lastPage != firstPage, end != lastPage + pageSize { partial.append(lastPage) }
        partialPages = partial
    }
}
