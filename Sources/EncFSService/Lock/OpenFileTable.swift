import EncFSCore
import Synchronization

/// The files open under `--protection unless-open`, by FUSE file handle:
/// each keeps its own key (``DetachedFile``), so it reads on after a lock
/// until it is released, when its key is wiped.
///
/// Only opens and releases take the mutex, and reads only while the mount
/// is locked: an unlocked mount reads through the worker's workspace.
package final class OpenFileTable: Sendable {
    private struct State {
        var files: [UInt64: DetachedFile] = [:]
        /// Handles start at 1: 0 is the handle of an open that keeps nothing.
        var next: UInt64 = 1
    }

    private let state = Mutex(State())

    /// Keeps `file` and returns its handle.
    package func insert(_ file: DetachedFile) -> UInt64 {
        state.withLock { state in
            let handle = state.next
            state.next &+= 1
            state.files[handle] = file
            return handle
        }
    }

    /// The file of `handle`, if it is one this table keeps.
    package func file(_ handle: UInt64) -> DetachedFile? {
        state.withLock { $0.files[handle] }
    }

    /// The entry of an open file with inode `inode` (for `getattr` while
    /// locked: the kernel asks before reading once a lock invalidated the
    /// attributes).
    package func entry(inode: UInt64) -> IndexEntry? {
        state.withLock { state in state.files.values.first { UInt64($0.entry.position + 1) == inode }?.entry }
    }

    /// Forgets `handle`; its key is wiped once no read still uses it.
    package func remove(_ handle: UInt64) {
        _ = state.withLock { $0.files.removeValue(forKey: handle) }
    }
}
