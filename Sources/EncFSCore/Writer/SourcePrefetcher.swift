import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Asks the kernel to read the source files ahead of the packer, on a
/// thread of its own.
///
/// The packer reads one file after the other. When the source is not in
/// the page cache, each small file then costs a full disk round trip with
/// nothing else in flight, and the disk idles between them (20,000 small
/// files read one by one take about twice as long as the same files read by
/// several readers at once; docs/PERFORMANCE.md). This thread walks ahead in
/// pack order and calls `posix_fadvise(POSIX_FADV_WILLNEED)` on what the
/// packer will read next: the kernel starts those reads without waiting for
/// them, so many are in flight while the packer works. It stays within a
/// window of bytes (plus one step) and of files ahead of what the packer
/// has read, so that the prefetched pages are still cached when they are
/// needed and few descriptors are opened ahead. When it reaches that limit
/// it sleeps until the packer has moved a quarter of the window (and of the
/// file limit) on: woken at every chunk, as it first was, it cost the
/// packer a context switch and an open, a hint and a close per 32 KiB chunk
/// of a compressed pack (docs/PERFORMANCE.md).
///
/// Only page-cache hints: it reads no file into this process, never fails
/// the pack (a file it cannot open is skipped; the packer reports it), and
/// opens each file with the same `O_NOFOLLOW` the packer uses.
final class SourcePrefetcher: Sendable {
    /// One file in pack order: its path below the root and the size the
    /// walk saw.
    struct File: Sendable {
        var relativePath: [UInt8]
        var size: UInt64
    }

    /// How far ahead of the packer, in bytes, by default.
    static let defaultWindow: UInt64 = 64 << 20
    /// How far ahead of the packer, in files, by default.
    static let defaultFilesAhead = 512
    /// Largest range asked for at once in a big file by default, so that
    /// the packer's progress is seen between two hints.
    static let defaultStep: UInt64 = 8 << 20

    private let window: UInt64
    private let maximumFilesAhead: Int
    private let step: UInt64
    private let root: FileDescriptor
    private let files: [File]
    /// Where each file starts if all files were laid end to end in pack
    /// order; one more entry, the total.
    private let starts: [UInt64]
    /// The packer's position in that concatenation.
    private let consumed = Atomic<UInt64>(0)
    /// The index of the file the packer is in.
    private let consumedFile = Atomic<Int>(0)
    /// Set when the prefetch thread sleeps until the packer moves on.
    private let waiting = Atomic<Bool>(false)
    /// Where the sleeping prefetch thread wants to go on: it is woken when
    /// a hint there would be within reach (set before `waiting`).
    private let resumePosition = Atomic<UInt64>(0)
    private let resumeFile = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)

    /// Starts prefetching `files` (in the order the packer reads them)
    /// below `root`. The thread holds this object until it ends: call
    /// ``stop()`` when packing ends, also on failure.
    ///
    /// - Parameters:
    ///   - window: how many bytes ahead of the packer hints may reach.
    ///   - filesAhead: how many files ahead of the packer.
    ///   - step: the largest range one hint asks for.
    init(root: FileDescriptor, files: [File], window: UInt64 = defaultWindow, filesAhead: Int = defaultFilesAhead,
         step: UInt64 = defaultStep) {
        self.root = root
        self.window = window
        maximumFilesAhead = filesAhead
        self.step = max(step, 1)
        self.files = files
        var starts = [UInt64]()
        starts.reserveCapacity(files.count + 1)
        var total: UInt64 = 0
        for file in files {
            starts.append(total)
            total &+= file.size
        }
        starts.append(total)
        self.starts = starts
        DispatchQueue(label: "encfs-pack.prefetch").async { [self] in
            run()
            exited.signal()
        }
    }

    /// The packer has read `bytes` bytes of file number `file` (its
    /// position in `files`).
    func packerReached(file: Int, offset bytes: UInt64) {
        guard file < files.count else { return }
        consumedFile.store(file, ordering: .relaxed)
        consumed.store(starts[file] &+ min(bytes, files[file].size), ordering: .releasing)
        guard waiting.load(ordering: .acquiring),
              isWithinReach(position: resumePosition.load(ordering: .relaxed), file: resumeFile.load(ordering: .relaxed)) else { return }
        if waiting.exchange(false, ordering: .acquiringAndReleasing) { wake.signal() }
    }

    /// Ends the prefetch thread and waits for it (before the packer closes
    /// the source directory or returns).
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        exited.wait()
    }

    /// The prefetch loop: one hint after the other, sleeping whenever it is
    /// far enough ahead.
    private func run() {
        var file = 0
        var offset: UInt64 = 0
        while file < files.count, !stopping.load(ordering: .acquiring) {
            let position = starts[file] &+ offset
            guard isWithinReach(position: position, file: file) else {
                sleepUntilThePackerMoves(position: position, file: file)
                continue
            }
            // Files the packer has passed are not worth a hint any more.
            let reached = consumedFile.load(ordering: .relaxed)
            if reached > file {
                file = reached
                offset = 0
                continue
            }
            let size = files[file].size
            guard size > 0, offset < size else {
                file += 1
                offset = 0
                continue
            }
            // Opened for one hint and closed at once: no descriptor is held
            // while this thread sleeps, and the packer's own is the only one
            // that stays open on a file.
            guard let opened = try? FileDescriptor.open(files[file].relativePath, in: root, flags: O_RDONLY | O_NOFOLLOW) else {
                file += 1
                offset = 0
                continue
            }
            let length = min(size - offset, step)
            _ = posix_fadvise(opened.rawValue, off_t(clamping: offset), off_t(clamping: length), POSIX_FADV_WILLNEED)
            offset += length
        }
    }

    /// Whether a hint at `position` (in file number `file`) stays within
    /// the window and the file limit.
    private func isWithinReach(position: UInt64, file: Int) -> Bool {
        let packer = consumed.load(ordering: .acquiring)
        return position <= packer &+ window && file <= consumedFile.load(ordering: .relaxed) &+ maximumFilesAhead
    }

    /// Sleeps until ``packerReached(file:offset:)`` finds the packer a
    /// quarter of the window and of the file limit further on (a hint at
    /// `position` then within reach with that much to spare), or
    /// ``stop()``; the flag is set before the condition is checked again, so
    /// a move in between is not missed.
    private func sleepUntilThePackerMoves(position: UInt64, file: Int) {
        let resume = (position: position &+ window / 4, file: file &+ maximumFilesAhead / 4)
        resumePosition.store(resume.position, ordering: .relaxed)
        resumeFile.store(resume.file, ordering: .relaxed)
        waiting.store(true, ordering: .sequentiallyConsistent)
        if stopping.load(ordering: .sequentiallyConsistent) || isWithinReach(position: resume.position, file: resume.file) {
            // Take back the flag; if the packer already took it, its
            // signal is pending and is consumed here.
            if !waiting.exchange(false, ordering: .acquiringAndReleasing) { wake.wait() }
            return
        }
        wake.wait()
    }
}
