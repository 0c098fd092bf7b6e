import EncFSCore
import Synchronization

/// Hands an opened reader to a mount so that the mount holds the only
/// reference: a lock wipes the keys by dropping that reference, which
/// a local variable of the caller (alive until its scope ends) would keep.
///
/// Make it from the open call itself, `ReaderHandoff(try
/// BundleReader.open(…))`, never from a variable that outlives the mount.
package final class ReaderHandoff: Sendable {
    private let reader: Mutex<BundleReader?>

    /// - Parameter reader: the opened bundle, or nil to start locked.
    package init(_ reader: BundleReader?) {
        self.reader = Mutex(reader)
    }

    /// The reader, leaving nil behind.
    package func take() -> BundleReader? {
        reader.withLock { reader in
            let taken = reader
            reader = nil
            return taken
        }
    }
}
