import Synchronization

/// How far a long operation (packing, verifying, re-encrypting) has got:
/// counters the working thread advances and a display on another thread
/// reads.
///
/// The core only counts: no clock, no terminal, no output. The command
/// layer decides whether and how often to draw (`ProgressDisplay`). The
/// counters are relaxed atomics: a reader may see files and bytes from
/// slightly different moments, which a progress line does not mind, and
/// the worker pays one atomic add per chunk batch.
package final class WorkProgress: Sendable {
    /// The counters at one moment.
    package struct Snapshot: Sendable, Equatable {
        package var filesDone: Int
        package var filesTotal: Int
        package var bytesDone: UInt64
        package var bytesTotal: UInt64
    }

    private let filesDone = Atomic<Int>(0)
    private let filesTotal = Atomic<Int>(0)
    private let bytesDone = Atomic<UInt64>(0)
    private let bytesTotal = Atomic<UInt64>(0)

    package init() {}

    /// Sets what the whole operation covers (plaintext bytes of regular files).
    package func begin(files: Int, bytes: UInt64) {
        filesTotal.store(files, ordering: .relaxed)
        bytesTotal.store(bytes, ordering: .relaxed)
    }

    /// Counts `bytes` more plaintext bytes done.
    package func add(bytes: UInt64) {
        bytesDone.add(bytes, ordering: .relaxed)
    }

    /// Counts one more file done.
    package func finishFile() {
        filesDone.add(1, ordering: .relaxed)
    }

    /// The counters now.
    package var snapshot: Snapshot {
        Snapshot(filesDone: filesDone.load(ordering: .relaxed), filesTotal: filesTotal.load(ordering: .relaxed),
                 bytesDone: bytesDone.load(ordering: .relaxed), bytesTotal: bytesTotal.load(ordering: .relaxed))
    }
}
