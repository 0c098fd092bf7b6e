import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// One libfuse worker thread's scratch space: a chunk workspace, a reply
/// buffer (file contents and directory listings) and a name buffer, found through a thread-specific key and used by that thread only.
///
/// Shared pools behind a lock cost a measurable share of the CPU with four
/// concurrent random readers on two cores (the lock spins while its holder
/// waits for a core); per-thread scratch takes no lock at all. The thread's
/// scratch is freed (buffers wiped) when libfuse ends the thread.
/// `@unchecked Sendable`: only its own thread touches it.
final class WorkerScratch: @unchecked Sendable {
    let workspace: ChunkWorkspace
    /// Grows in ``MountContext/bufferStep`` steps to the largest read this
    /// thread has served.
    private var buffer: ReplyBuffer?

    /// One name or symlink target at a time, NUL-terminated for libfuse:
    /// names are as secret as contents, so this is locked like the reply
    /// buffer, and wiped after every use and when freed.
    let name = ReplyBuffer(capacity: BundleFormat.maximumSymlinkLength + 1)

    init(workspace: ChunkWorkspace) {
        self.workspace = workspace
    }

    /// A buffer of at least `size` bytes (`size` ≤ ``MountContext/maximumRead``),
    /// valid until the next call. `grown` is set when a new buffer was made.
    func buffer(size: Int, grown: inout Bool) -> ReplyBuffer {
        if let buffer, buffer.bytes.count >= size { return buffer }
        grown = true
        let step = MountContext.bufferStep
        let capacity = min((max(size, 1) + step - 1) / step * step, MountContext.maximumRead)
        let grown = ReplyBuffer(capacity: capacity)
        buffer = grown
        return grown
    }
}
