import CryptCore
import EncFSCore
import EncFSService

/// One response body, decrypted as libmicrohttpd asks for it: each call
/// fills the connection's own send buffer (at most
/// ``HTTPEndpoint/blockSize`` bytes, from the connection's bounded memory
/// pool) straight from the reader, so memory does not grow with the file.
///
/// A chunk that fails authentication after the headers went out ends the
/// response with an error: libmicrohttpd closes the connection short of
/// `Content-Length`, the client sees a truncated body, never a wrong
/// byte, and the log names inode and chunk as the mount does.
///
/// A lock wipes it (``wipe()``, registered with the bundle unless the
/// protection is `unless-open`): the reader and the file key go, and the
/// next fill ends the response short. `@unchecked Sendable`: `reader` and
/// `key` change only in ``wipe()``, which runs holding the bundle's gate
/// for writing, while every fill holds it for reading.
final class BodyStream: WipedAtLock, @unchecked Sendable {
    private let bundle: LockableBundle
    private var reader: BundleReader?
    private let entry: IndexEntry
    private var key: SymmetricKey?
    private let start: UInt64
    private let length: UInt64
    private let log: ServeLog

    init(bundle: LockableBundle, reader: BundleReader, entry: IndexEntry, key: SymmetricKey, start: UInt64, length: UInt64,
         log: ServeLog) {
        self.bundle = bundle
        self.reader = reader
        self.entry = entry
        self.key = key
        self.start = start
        self.length = length
        self.log = log
    }

    func wipe() {
        reader = nil
        key = nil
    }

    /// Called when libmicrohttpd is done with the body: the lock need no
    /// longer wipe it (its key goes as it is freed).
    func finish() {
        bundle.unregister(self)
    }

    /// Fills `buffer` with the body from `position` (relative to the
    /// body's start).
    ///
    /// - Returns: the bytes written; -1 at the end; -2 (the response is
    ///   aborted) on any error.
    func fill(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        bundle.withGate { _ in fillHoldingGate(from: position, into: buffer) }
    }

    private func fillHoldingGate(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard position < length else { return -1 }
        guard let reader, let key else {
            log.log("info", "inode \(entry.position + 1): the server locked, response aborted")
            return -2
        }
        // Sending a body is use, as a mount's reads are (`--idle-lock`).
        bundle.activity.touch()
        let count = Int(min(UInt64(buffer.count), length - position))
        do {
            let n = try reader.read(entry, key: key, fromOffset: start + position,
                                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
            guard n > 0 else {
                log.log("error", "inode \(entry.position + 1) ended early, response aborted")
                return -2
            }
            return n
        } catch BundleError.corruptChunk(let position, let chunk) {
            log.log("error", "chunk \(chunk) of inode \(position + 1) failed authentication, response aborted")
            return -2
        } catch {
            log.log("error", "read of inode \(entry.position + 1) failed: \((error as? BundleError)?.message ?? "\(error)"), response aborted")
            return -2
        }
    }
}
