import EncFSCore
import EncFSService
import EncFSMount
#if canImport(Glibc)
import Glibc
import EncFSCLI
#endif

extension CtlCommand {
    /// A connection to the daemon of the mount at `canonical` (the
    /// mountpoint's canonical path), checked before a byte is sent, since
    /// an unlock request carries secrets:
    /// - only the first directory where the socket exists is tried
    ///   (``ControlSocket/directories(forClient:runtimeDirectory:)``): root
    ///   never goes past a socket in /run/encfs, even a dead one, to the
    ///   runtime directory it inherited through `su` or `sudo -E`;
    /// - the directory passes the daemon's own check: a 0700 directory,
    ///   not a symlink, of root (/run/encfs) or of this user;
    /// - the process listening is the directory's owner (`SO_PEERCRED`);
    /// - when that is another user (root reaching a user's mount), the
    ///   encfs mount at the mountpoint is that user's (mountinfo).
    ///
    /// - Throws: `CommandError` saying which check failed, or that no
    ///   daemon answers.
    static func connectToDaemon(of canonical: [UInt8]) throws -> FileDescriptor {
        let me = getuid()
        for (directory, owner) in ControlSocket.directories(forClient: me, runtimeDirectory: LockOptions.runtimeDirectory()) {
            let path = ControlSocket.path(forMountpoint: canonical, in: directory)
            var st = stat()
            guard path.withCString({ lstat($0, &st) }) == 0 else { continue }
            let (socket, peer) = try checkedConnect(to: path, in: directory, owner: owner, shown: canonical)
            if peer != me, MountSession.mountingUID(ofMountpoint: canonical) != peer {
                throw CommandError("refusing the control socket: its owner (uid \(peer)) has no encfs mount at this mountpoint",
                                   path: path)
            }
            return socket
        }
        throw CommandError(.noControlSocket, "no control socket for this mountpoint", path: canonical)
    }

    /// Connects to the control socket at `path` in `directory` once the
    /// directory passes the daemon's own check (a 0700 directory, not a
    /// symlink, of `owner` when given) and the process listening is the
    /// directory's owner (`SO_PEERCRED`): the checks for mounts and
    /// servers alike.
    ///
    /// - Returns: the socket and the listening process's uid.
    /// - Throws: `CommandError` saying which check failed (`shown` names
    ///   what was addressed).
    static func checkedConnect(to path: [UInt8], in directory: [UInt8], owner: uid_t?, shown: [UInt8]) throws
        -> (socket: FileDescriptor, peer: uid_t) {
        let directoryOwner: uid_t
        do { directoryOwner = try ControlSocket.checkDirectory(directory, owner: owner) } catch {
            throw CommandError("refusing the control socket: \((error as? BundleError)?.message ?? "\(error)")", path: directory)
        }
        let socket: FileDescriptor
        do { socket = try ControlSocket.connect(to: path) } catch {
            let code = (error as? BundleError)?.errno ?? EIO
            if code == ECONNREFUSED {
                let who = shown.first == UInt8(ascii: "/") ? "the mount's daemon" : "the server"
                throw CommandError("\(who) does not answer (it was killed?)", path: shown)
            }
            throw CommandError("cannot connect to the control socket: \(String(cString: strerror(code)))", path: shown)
        }
        guard let peer = ControlSocket.peerCredentials(of: socket), peer.uid == directoryOwner else {
            throw CommandError("refusing the control socket: the process listening on it is not its directory's owner", path: path)
        }
        return (socket, peer.uid)
    }
}
