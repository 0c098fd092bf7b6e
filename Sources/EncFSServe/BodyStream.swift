import CryptCore
import EncFSCore

/// One response body, decrypted as libmicrohttpd asks for it: each call
/// fills the connection's own send buffer (at most
/// ``HTTPEndpoint/blockSize`` bytes, from the connection's bounded memory
/// pool) straight from the reader, so memory does not grow with the file.
///
/// A chunk that fails authentication after the headers went out ends the
/// response with an error: libmicrohttpd closes the connection short of
/// `Content-Length`, the client sees a truncated body, never a wrong
/// byte, and the log names inode and chunk as the mount does.
final class BodyStream {
    private let reader: BundleReader
    private let entry: IndexEntry
    private let key: SymmetricKey
    private let start: UInt64
    private let length: UInt64
    private let log: ServeLog

    init(reader: BundleReader, entry: IndexEntry, key: SymmetricKey, start: UInt64, length: UInt64, log: ServeLog) {
        self.reader = reader
        self.entry = entry
        self.key = key
        self.start = start
        self.length = length
        self.log = log
    }

    /// Fills `buffer` with the body from `position` (relative to the
    /// body's start).
    ///
    /// - Returns: the bytes written; -1 at the end; -2 (the response is
    ///   aborted) on any error.
    func fill(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard position < length else { return -1 }
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
