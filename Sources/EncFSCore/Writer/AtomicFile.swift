import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// An output file that appears at its path only when complete.
///
/// Created with `O_TMPFILE` in the destination's directory: it has no name
/// while it is written, so a crash or SIGKILL leaves nothing behind. On
/// ``commit()`` it is synced, linked to a hidden temporary name with
/// `linkat`, renamed over the destination (replacing an existing file
/// atomically) and the directory is synced. File systems without
/// `O_TMPFILE` fall back to a hidden named file that ``abort()`` removes, and
/// `InterruptCleanup` on SIGINT, SIGTERM or SIGHUP.
package final class AtomicFile {
    /// `O_TMPFILE` is a macro over `__O_TMPFILE | O_DIRECTORY` that Swift does
    /// not import; `__O_TMPFILE` is 020000000 on every Linux architecture
    /// Swift supports, and `O_DIRECTORY` comes from Glibc.
    static let openTemporaryFlag: Int32 = 0o20000000 | O_DIRECTORY

    /// The output, open for reading and writing.
    package let file: FileDescriptor
    private let destination: [UInt8]
    private let directory: [UInt8]
    private var namedTemporary: [UInt8]?
    private var finished = false

    /// Creates the unnamed file next to `destination`.
    ///
    /// - Throws: `BundleError.io` naming the destination directory.
    package init(destination: [UInt8], mode: mode_t = 0o644) throws {
        self.destination = destination
        if let slash = destination.lastIndex(of: 0x2F) {
            directory = slash == 0 ? [0x2F] : Array(destination[..<slash])
        } else {
            directory = [0x2E]
        }
        let parent = directory
        func create(_ path: [UInt8], flags: Int32) throws(BundleError) -> FileDescriptor {
            let fd = try SystemCall.retrying("create output file in", path: parent) {
                path.withCString { open($0, flags | O_RDWR | O_CLOEXEC, mode) }
            }
            return FileDescriptor(taking: fd, path: destination)
        }
        do throws(BundleError) {
            file = try create(parent, flags: Self.openTemporaryFlag)
        } catch where [EOPNOTSUPP, EISDIR, EINVAL].contains(error.errno) {
            // No O_TMPFILE on this file system: use a hidden named file.
            let name = try Self.temporaryName(for: destination)
            InterruptCleanup.arm(name)
            do { file = try create(name, flags: O_CREAT | O_EXCL) } catch {
                InterruptCleanup.disarm()
                throw error
            }
            namedTemporary = name
        }
    }

    deinit {
        if !finished { abort() }
    }

    /// Makes the file visible at the destination path.
    ///
    /// - Throws: `BundleError.io`; the destination is then unchanged.
    /// - Parameter replacing: when false, fail with EEXIST instead of
    ///   replacing an existing file (checked atomically by `linkat`).
    package func commit(replacing: Bool = true) throws {
        _ = try SystemCall.retrying("sync", path: destination) { fsync(file.rawValue) }
        if !replacing {
            try commitWithoutReplacing()
            return
        }
        let temporary: [UInt8]
        if let named = namedTemporary {
            temporary = named
        } else {
            temporary = try Self.temporaryName(for: destination)
            let procPath = Array("/proc/self/fd/\(file.rawValue)".utf8)
            // Armed before the name exists, so no signal falls in between.
            InterruptCleanup.arm(temporary)
            let rc = procPath.withCString { p in temporary.withCString { linkat(AT_FDCWD, p, AT_FDCWD, $0, AT_SYMLINK_FOLLOW) } }
            guard rc == 0 else {
                let saved = errno
                InterruptCleanup.disarm()
                throw BundleError.io(errno: saved, operation: "link output file", path: destination)
            }
        }
        let renamed = temporary.withCString { t in destination.withCString { rename(t, $0) } }
        guard renamed == 0 else {
            let saved = errno
            _ = temporary.withCString { unlink($0) }
            InterruptCleanup.disarm()
            namedTemporary = nil
            throw BundleError.io(errno: saved, operation: "rename output file to", path: destination)
        }
        InterruptCleanup.disarm()
        namedTemporary = nil
        finished = true
        syncDirectory()
    }

    private func commitWithoutReplacing() throws {
        if let named = namedTemporary {
            let rc = named.withCString { t in destination.withCString { link(t, $0) } }
            guard rc == 0 else { throw BundleError.lastIO("create", destination) }
            _ = named.withCString { unlink($0) }
            InterruptCleanup.disarm()
            namedTemporary = nil
        } else {
            let procPath = Array("/proc/self/fd/\(file.rawValue)".utf8)
            let rc = procPath.withCString { p in destination.withCString { linkat(AT_FDCWD, p, AT_FDCWD, $0, AT_SYMLINK_FOLLOW) } }
            guard rc == 0 else { throw BundleError.lastIO("create", destination) }
        }
        finished = true
        syncDirectory()
    }

    /// Best effort: the rename is durable once the directory is synced.
    private func syncDirectory() {
        if let dir = try? FileDescriptor.open(directory, flags: O_RDONLY | O_DIRECTORY) {
            _ = try? SystemCall.retrying("sync", path: directory) { fsync(dir.rawValue) }
        }
    }

    /// Discards the file: nothing is left at any path.
    package func abort() {
        guard !finished else { return }
        finished = true
        if let named = namedTemporary {
            _ = named.withCString { unlink($0) }
            InterruptCleanup.disarm()
        }
    }

    private static func temporaryName(for destination: [UInt8]) throws -> [UInt8] {
        let slash = destination.lastIndex(of: 0x2F)
        let dir = slash.map { Array(destination[...$0]) } ?? []
        let base = slash.map { Array(destination[($0 + 1)...]) } ?? destination
        let suffix = Hex.encode(try randomBytes(6))
        return dir + Array(".".utf8) + base + Array(".encfs-tmp-\(suffix)".utf8)
    }
}
