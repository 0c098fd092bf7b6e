import EncFSCore
import EncFSService
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
/// `@unchecked Sendable`: only its own thread touches it, within a request
/// that holds the bundle's gate; a lock wipes it (``wipe()``) while it
/// holds the gate for writing, so never at the same time.
final class WorkerScratch: WipedAtLock, @unchecked Sendable {
    /// Made from the reader being served; nil before the first read and
    /// after a lock (its cached file keys and decrypted chunk must go with
    /// the reader: a workspace belongs to one reader).
    private var currentWorkspace: ChunkWorkspace?
    /// Grows in ``MountContext/bufferStep`` steps to the largest read this
    /// thread has served.
    private var buffer: ReplyBuffer?

    /// One name or symlink target at a time, NUL-terminated for libfuse:
    /// names are as secret as contents, so this is locked like the reply
    /// buffer, and wiped after every use and when freed.
    let name = ReplyBuffer(capacity: BundleFormat.maximumSymlinkLength + 1)

    init() {}

    /// The workspace for reads from `reader`, made on first use.
    ///
    /// - Throws: `BundleError.crypto` when a cipher context cannot be made.
    func workspace(for reader: BundleReader) throws -> ChunkWorkspace {
        if let currentWorkspace { return currentWorkspace }
        let made = try reader.makeWorkspace()
        currentWorkspace = made
        return made
    }

    /// Wipes what this thread holds of the unlocked bundle: the workspace
    /// (file keys, the last decrypted chunk; freed, which wipes it), the
    /// reply buffer (the last plaintext or listing sent) and the name
    /// buffer. Called at lock, with no request running.
    func wipe() {
        currentWorkspace = nil
        if let buffer { SecureBytes.wipe(buffer.bytes) }
        SecureBytes.wipe(name.bytes)
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
