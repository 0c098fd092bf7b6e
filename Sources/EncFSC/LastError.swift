#if canImport(Glibc)
import Glibc
#endif

/// The calling thread's last failure, behind the encfs_last_error_*
/// functions: kept in a pthread key, since Swift has no thread-local
/// storage of its own. Written only when a call fails, so a successful
/// read touches none of it.
final class LastError {
    var status: Int32 = 0
    /// NUL-terminated copies, owned here (malloc), so the pointers handed
    /// out stay valid until the thread's next failure.
    var message: UnsafeMutablePointer<CChar>?
    var path: UnsafeMutablePointer<CChar>?
    var pathLength = 0
    var chunk: UInt64 = 0
    var errno: Int32 = 0

    deinit {
        free(message)
        free(path)
    }

    /// The key, made once (Swift initializes globals exactly once, from
    /// any thread); its destructor releases a thread's record when the
    /// thread ends.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let made = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<LastError>.fromOpaque(pointer).release()
        }
        // Only PTHREAD_KEYS_MAX keys exist per process; without one no
        // error detail can be kept, which would be an internal failure.
        if made != 0 { preconditionFailure("internal error: pthread_key_create failed (\(made))") }
        return key
    }()

    /// The calling thread's record, or nil when it has had no failure.
    static var current: LastError? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<LastError>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Records `failure` as the calling thread's last error.
    static func record(_ failure: Failure) {
        let record: LastError
        if let existing = current {
            record = existing
        } else {
            record = LastError()
            pthread_setspecific(key, Unmanaged.passRetained(record).toOpaque())
        }
        record.status = failure.status.rawValue
        free(record.message)
        record.message = strdup(failure.message)
        free(record.path)
        record.path = copyBytes(failure.path)
        record.pathLength = failure.path.count
        record.chunk = failure.chunk
        record.errno = failure.errno
    }

    /// A malloc'd NUL-terminated copy of `bytes`; nil if memory ran out.
    static func copyBytes(_ bytes: [UInt8]) -> UnsafeMutablePointer<CChar>? {
        guard let copy = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else { return nil }
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress { memcpy(copy, base, raw.count) }
        }
        copy[bytes.count] = 0
        return copy
    }
}
