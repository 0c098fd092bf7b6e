import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// What `encfs-ctl` and a mount daemon say to each other over the control
/// socket: one request, one reply, then the connection ends.
///
/// Every message is a frame: its length as 4 bytes big-endian, then that
/// many bytes (at most ``maximumFrameLength``). A request's first byte is
/// a ``Request`` code; an unlock request continues with the secrets, each
/// as a ``SecretKind`` byte, a 4-byte big-endian length and the bytes
/// (raw key: 32 bytes; passphrase: its bytes; identity: the private key
/// as PKCS#8 PEM). A reply's first byte is 0 (done) or the refusal's
/// ``ErrorCode``, then text: for `status`, `key=value` lines
/// (``StatusField``); for `lock`, the number of handles still open; for a
/// refusal, one lowercase message, for people only (``Reply``).
/// docs/ARCHITECTURE.md shows the same table.
package enum ControlProtocol {
    /// Longest frame either side accepts (an RSA identity in PEM is a few
    /// KiB; a passphrase file at most `KeyFiles`' limit).
    package static let maximumFrameLength = 64 << 10
    /// How long either side waits for a whole frame (not for each of its
    /// bytes: a client trickling one byte at a time is cut off too), and
    /// for a write to be taken: a client that stalls holds the control
    /// thread (never a FUSE worker) this long at most.
    package static let timeoutSeconds = 5
    /// How long a client waits for the reply to `lock` or `unlock`: a lock
    /// waits for the requests in flight, an unlock runs scrypt once per
    /// passphrase and slot. A client that gives up before is not obeyed
    /// behind its back: the daemon drops an unlock whose client has gone.
    package static let replyTimeoutSeconds = 120

    /// The first byte of a request.
    package enum Request: UInt8, Sendable {
        case status = 1
        /// Lock; refused under `until-unmount`.
        case lock = 2
        /// Lock whatever the protection class (`encfs-ctl lock --force`).
        case forceLock = 3
        /// Unlock with the secrets that follow.
        case unlock = 4
        /// The files and chunks read since mount (a remote bundle): one
        /// line per file, `HEXPATH<TAB>first-last,first-last…` (chunk
        /// numbers, inclusive; the path in hex, whatever its bytes).
        case accessLog = 5
    }

    /// A reply: done, with the answer, or refused, with what went wrong
    /// and a message. The client derives its hint and exit status from
    /// the code, never from the message.
    package enum Reply: Sendable, Equatable {
        case ok(String)
        case refused(ErrorCode, String)

        /// The reply for a request that failed with `error`.
        package init(refusing error: any Error) {
            let refusal = ControlRefusal(error)
            self = .refused(refusal.code, refusal.message)
        }

        /// The frame's body: 0 or the code, then the text.
        package var encoded: [UInt8] {
            switch self {
            case .ok(let text): return [0] + Array(text.utf8)
            case .refused(let code, let text): return [code.rawValue] + Array(text.utf8)
            }
        }

        /// The reply in a frame's body; a code this build does not know
        /// (another build's daemon) as ``ErrorCode/other``.
        ///
        /// - Returns: nil for an empty body.
        package init?(decoding body: [UInt8]) {
            guard let first = body.first else { return nil }
            let text = String(decoding: body.dropFirst(), as: UTF8.self)
            self = first == 0 ? .ok(text) : .refused(ErrorCode(rawValue: first) ?? .other, text)
        }
    }

    /// The kind byte of one secret in an unlock request.
    package enum SecretKind: UInt8, Sendable {
        case rawKey = 1
        case passphrase = 2
        case identity = 3
    }

    /// The names of the `status` reply's fields, in the order sent.
    package enum StatusField {
        /// `locked` or `unlocked`.
        package static let state = "state"
        /// A ``ProtectionClass`` raw value.
        package static let protection = "protection"
        /// Handles open now, or `unknown` when the kernel skips opens.
        package static let openHandles = "open_handles"
        /// `--idle-lock` in seconds, 0 when off.
        package static let idleLock = "idle_lock_seconds"
        /// Seconds since the last read, open, lookup or listing.
        package static let idleSeconds = "idle_seconds"
        /// The mountpoint served.
        package static let mountpoint = "mountpoint"
        /// `uring` or `classic`: what carries requests (``TransportChoice``).
        package static let transport = "transport"
        /// Requests served by the FUSE rings since mount (0 on classic).
        package static let ringRequests = "ring_requests"
        /// Requests the classic loop found by polling since mount, not
        /// waiting in the kernel (0 when it does not poll).
        package static let polledRequests = "polled_requests"
        /// `server` for encfs-serve; absent for a mount.
        package static let kind = "kind"
        /// encfs-serve's `--name`.
        package static let name = "name"
        /// HTTP requests encfs-serve answered since it started, whatever
        /// their status.
        package static let requestsServed = "requests_served"
        /// How many listen addresses follow, as `listen.0`, `listen.1`…
        /// (`127.0.0.1:41234`, `unix:PATH`).
        package static let listenCount = "listens"
        package static func listen(_ index: Int) -> String { "listen.\(index)" }
    }

    /// Writes `body` as one frame to `socket`.
    ///
    /// - Throws: `BundleError.io` (EPIPE, a timeout as EAGAIN).
    package static func send(_ body: UnsafeRawBufferPointer, to socket: FileDescriptor) throws {
        var length = UInt32(body.count).bigEndian
        try withUnsafeBytes(of: &length) { try socket.writeAll($0) }
        try socket.writeAll(body)
    }

    /// Reads one frame from `socket` into wiping storage (an unlock
    /// request carries secrets), all of it within `seconds`.
    ///
    /// - Throws: `BundleError.io` on a short read, a frame not complete in
    ///   time (ETIMEDOUT) or longer than ``maximumFrameLength``.
    package static func receive(from socket: FileDescriptor, within seconds: Int = timeoutSeconds) throws -> SecureBytes {
        let deadline = monotonicMilliseconds() + seconds * 1000
        var length: UInt32 = 0
        try withUnsafeMutableBytes(of: &length) { try readExactly(socket, into: $0, by: deadline) }
        let count = Int(UInt32(bigEndian: length))
        guard count >= 1, count <= maximumFrameLength else { throw BundleError.io(errno: EPROTO, operation: "read control message", path: []) }
        return try SecureBytes(count: count) { (out: UnsafeMutableRawBufferPointer) throws in
            try readExactly(socket, into: out, by: deadline)
        }
    }

    /// Fills `buffer` from `socket` before `deadline` (monotonic ms): each
    /// read waits in `poll` for what is left of the time, never for a
    /// fresh timeout per byte.
    private static func readExactly(_ socket: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, by deadline: Int) throws {
        let operation = "read control message"
        var done = 0
        while done < buffer.count {
            var ready = pollfd(fd: socket.rawValue, events: Int16(POLLIN), revents: 0)
            // The time left is taken again after an interruption.
            let polled = SystemCall.retryingInterrupts { () -> Int32 in
                let left = deadline - monotonicMilliseconds()
                return left > 0 ? poll(&ready, 1, Int32(clamping: left)) : 0
            }
            guard polled >= 0 else { throw BundleError.io(errno: errno, operation: operation, path: []) }
            guard polled > 0 else { throw BundleError.io(errno: ETIMEDOUT, operation: operation, path: []) }
            guard let base = buffer.baseAddress else { return }
            let n = SystemCall.retryingInterrupts { read(socket.rawValue, base + done, buffer.count - done) }
            if n < 0, errno == EAGAIN { continue }
            guard n >= 0 else { throw BundleError.io(errno: errno, operation: operation, path: []) }
            guard n > 0 else { throw BundleError.io(errno: EPROTO, operation: operation, path: []) }
            done += n
        }
    }

    /// Milliseconds on the monotonic clock.
    private static func monotonicMilliseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }

    /// The secrets of an unlock request (what follows its code).
    ///
    /// - Throws: `BundleError.io` (EPROTO) for a malformed list; what
    ///   parsing a key or an identity throws.
    package static func secrets(in body: UnsafeRawBufferPointer) throws -> [KeyMaterial] {
        var materials: [KeyMaterial] = []
        var at = 0
        let malformed = BundleError.io(errno: EPROTO, operation: "read unlock request", path: [])
        while at < body.count {
            guard body.count - at >= 5, let kind = SecretKind(rawValue: body[at]) else { throw malformed }
            let length = Int(body[at + 1]) << 24 | Int(body[at + 2]) << 16 | Int(body[at + 3]) << 8 | Int(body[at + 4])
            at += 5
            guard length <= body.count - at else { throw malformed }
            let bytes = UnsafeRawBufferPointer(rebasing: body[at..<(at + length)])
            at += length
            switch kind {
            case .rawKey: materials.append(.rawKey(try SymmetricKey(SecureBytes(copying: bytes))))
            case .passphrase: materials.append(.passphrase(SecureBytes(copying: bytes)))
            case .identity: materials.append(.identity(try PrivateKey(pem: bytes)))
            }
        }
        guard !materials.isEmpty else { throw malformed }
        return materials
    }

    /// An unlock request carrying `materials`, in wiping storage.
    ///
    /// - Throws: what exporting an identity throws.
    package static func unlockRequest(_ materials: [KeyMaterial]) throws -> SecureBytes {
        var parts: [(SecretKind, SecureBytes)] = []
        for material in materials {
            switch material {
            case .rawKey(let key): parts.append((.rawKey, key.withUnsafeBytes { SecureBytes(copying: $0) }))
            case .passphrase(let passphrase): parts.append((.passphrase, passphrase))
            case .identity(let key): parts.append((.identity, try key.pemPKCS8()))
            }
        }
        let count = 1 + parts.reduce(0) { $0 + 5 + $1.1.count }
        return SecureBytes(count: count) { (out: UnsafeMutableRawBufferPointer) in
            out[0] = Request.unlock.rawValue
            var at = 1
            for (kind, bytes) in parts {
                out[at] = kind.rawValue
                let length = UInt32(bytes.count)
                for k in 0..<4 { out[at + 1 + k] = UInt8(truncatingIfNeeded: length >> UInt32(24 - 8 * k)) }
                at += 5
                bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + $0.count)]).copyMemory(from: $0) }
                at += bytes.count
            }
        }
    }
}
