import EncFSCore
import CProcess
#if canImport(Glibc)
import Glibc
#endif

/// One `--allow-exe` program as the daemon found it at mount: its path and
/// the file itself, held open for as long as the mount.
///
/// A caller matches only when it runs this very file (device and inode of
/// `/proc/PID/exe`) from this path. The descriptor (`O_PATH`, it reads
/// nothing) keeps the inode allocated, so its number cannot be handed to
/// another file while the mount runs: a program put at the path later (an
/// upgrade, or an attacker who can write the directory) is a different
/// inode and matches nothing until the next mount.
package final class AllowedExecutable: Sendable {
    /// The path, symlinks resolved, as `/proc/PID/exe` shows it.
    package let path: [UInt8]
    /// The file at `path` when the mount started.
    package let file: CallerProcess.FileIdentity
    /// Holds the inode (see above); never read.
    private let pin: FileDescriptor

    /// Opens `path` and records what it is.
    ///
    /// - Throws: `BundleError.io` when it cannot be opened.
    package init(path: [UInt8]) throws(BundleError) {
        let fd = path.withCString { cprocess_open_path($0) }
        guard fd >= 0 else { throw .io(errno: errno, operation: "open --allow-exe program", path: path) }
        pin = FileDescriptor(taking: fd, path: path)
        file = CallerProcess.FileIdentity(try pin.status())
        self.path = path
    }

    /// Whether `executable` is this program: the same file, shown at the
    /// same path.
    package func matches(_ executable: CallerProcess.Executable) -> Bool {
        executable.file == file && path.elementsEqual(executable.path)
    }
}
