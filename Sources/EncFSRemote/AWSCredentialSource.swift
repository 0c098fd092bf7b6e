import CryptCore
import EncFSCore
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The AWS credentials an `s3://` bundle's requests are signed with, and
/// their rotation.
///
/// Credentials read from a file (a shared credentials file, a config file,
/// `--aws-credentials-file`, a systemd credential) are read again when the
/// file changes (checked at most once a second, by its inode, size and
/// modification time: a platform that rotates a session token rewrites or
/// replaces the file), and at once when the server refuses the ones in use
/// (``reloadAfterRefusal(seen:)``): a long-lived mount never needs a
/// remount because its credentials rotated. Credentials from the
/// environment are fixed for the process's life.
package final class AWSCredentialSource: Sendable, Equatable {
    /// Where the credentials were found.
    package enum Origin: Sendable, Equatable {
        /// `AWS_ACCESS_KEY_ID` and friends (or given by a library caller).
        case fixed
        /// A profile in a file, read again when it changes.
        case file(path: [UInt8], profile: [UInt8], configFile: Bool)
    }

    package let origin: Origin
    /// Told one line when the credentials were read again and changed.
    private let log: Mutex<(@Sendable (String) -> Void)?> = Mutex(nil)

    private struct State {
        var credentials: AWSCredentials
        /// Counts changes: a connection re-applies credentials when it saw
        /// an older one.
        var generation: Int
        /// The file as last read; nil: read it at the next check.
        var stamp: [Int]?
        var lastCheck: UInt64
    }
    private let state: Mutex<State>

    /// Largest credentials file read.
    static let maximumFile = 64 << 10
    /// Nanoseconds between two looks at the file.
    static let checkInterval: UInt64 = 1_000_000_000

    /// Credentials that never change.
    package init(fixed credentials: AWSCredentials) {
        origin = .fixed
        state = Mutex(State(credentials: credentials, generation: 0, stamp: [], lastCheck: 0))
    }

    /// The credentials of `profile` in the file at `path`, read now.
    ///
    /// - Throws: `RemoteError.credentials` when the file cannot be read or
    ///   the profile holds no credentials.
    package convenience init(file path: [UInt8], profile: [UInt8], configFile: Bool) throws(RemoteError) {
        guard let (credentials, stamp) = try Self.read(path, profile: profile, configFile: configFile) else {
            throw .credentials("no credentials for profile \(String(decoding: profile, as: UTF8.self)) in \(String(decoding: path, as: UTF8.self))")
        }
        self.init(origin: .file(path: path, profile: profile, configFile: configFile), credentials: credentials, stamp: stamp)
    }

    /// Credentials another process read from `origin` (the mount
    /// command's hand-over): the file is looked at again at the first
    /// request.
    package init(origin: Origin, credentials: AWSCredentials, stamp: [Int]? = nil) {
        self.origin = origin
        state = Mutex(State(credentials: credentials, generation: 0, stamp: origin == .fixed ? [] : stamp, lastCheck: 0))
    }

    /// Sets where the one line about a rotation goes (the mount's log).
    package func logRotations(to sink: @escaping @Sendable (String) -> Void) {
        log.withLock { $0 = sink }
    }

    package static func == (a: AWSCredentialSource, b: AWSCredentialSource) -> Bool { a === b }

    /// The credentials to sign with now and their generation; reads the
    /// file again first when it changed (looked at at most once a second).
    package func current() -> (credentials: AWSCredentials, generation: Int) {
        guard case .file(let path, let profile, let configFile) = origin else {
            return state.withLock { ($0.credentials, $0.generation) }
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let due = state.withLock { state -> Bool in
            guard now &- state.lastCheck >= Self.checkInterval || state.stamp == nil else { return false }
            state.lastCheck = now
            return true
        }
        if due, Self.stamp(of: path) != state.withLock({ $0.stamp }) {
            replace(from: path, profile: profile, configFile: configFile, why: "the file changed")
        }
        return state.withLock { ($0.credentials, $0.generation) }
    }

    /// After the server refused the credentials of `generation`: reads the
    /// file again now.
    ///
    /// - Returns: whether newer credentials than those of `generation` are
    ///   there to retry with.
    package func reloadAfterRefusal(seen generation: Int) -> Bool {
        if case .file(let path, let profile, let configFile) = origin {
            replace(from: path, profile: profile, configFile: configFile, why: "the server refused the previous ones")
        }
        return state.withLock { $0.generation != generation }
    }

    /// Reads the file; on a change, a new generation and one log line.
    /// A file that cannot be read (being replaced) keeps the old ones.
    private func replace(from path: [UInt8], profile: [UInt8], configFile: Bool, why: String) {
        guard let (credentials, stamp) = try? Self.read(path, profile: profile, configFile: configFile) else { return }
        let changed = state.withLock { state -> Bool in
            state.stamp = stamp
            guard state.credentials != credentials else { return false }
            state.credentials = credentials
            state.generation += 1
            return true
        }
        if changed, let sink = log.withLock({ $0 }) {
            sink("AWS credentials read again from \(String(decoding: path, as: UTF8.self)) (\(why)): key id "
                 + String(decoding: credentials.accessKeyID, as: UTF8.self))
        }
    }

    private static func read(_ path: [UInt8], profile: [UInt8],
                             configFile: Bool) throws(RemoteError) -> (AWSCredentials, [Int])? {
        let stamp = Self.stamp(of: path)
        let text: SecureBytes
        do { text = try LocalFiles.readSecretFile(path, limit: maximumFile) } catch {
            throw .credentials("cannot read the credentials file \(String(decoding: path, as: UTF8.self))")
        }
        let parsed = try text.withUnsafeBytes { (bytes) throws(RemoteError) in
            try AWSCredentials.parse(bytes, profile: profile, configFile: configFile)
        }
        return parsed.map { ($0, stamp ?? []) }
    }

    /// Device, inode, size and modification time of `path`; nil when it
    /// cannot be looked at.
    static func stamp(of path: [UInt8]) -> [Int]? {
        var st = stat()
        guard path.withCString({ stat($0, &st) }) == 0 else { return nil }
        return [Int(st.st_dev), Int(st.st_ino), Int(st.st_size), Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec)]
    }
}
