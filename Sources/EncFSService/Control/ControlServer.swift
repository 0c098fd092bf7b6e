import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Serves the control socket of a mount or a server (``ControlledService``)
/// on a thread of its own, and runs the idle timer there.
///
/// One client at a time, each bounded by the protocol's timeouts: a slow,
/// silent or trickling client delays the next client and the idle check by
/// ``ControlProtocol/timeoutSeconds`` at most (its whole request must come
/// in that time), and never a FUSE worker (they do not wait for this
/// thread, except while a lock holds the bundle's gate, which involves no
/// client I/O). The secrets of an unlock are tried on another thread
/// (``UnlockWorker``), so status, lock and the idle check go on meanwhile.
package final class ControlServer: @unchecked Sendable {
    // @unchecked: `thread` is written by start and read by stop, both on
    // the thread that serves the session; the rest is immutable.
    private let controller: any ControlledService
    private let unlocks: UnlockWorker
    private let listener: FileDescriptor
    package let socketPath: [UInt8]
    /// Written to by ``stop()`` to end the thread's poll.
    private let wake: (read: FileDescriptor, write: FileDescriptor)
    private var thread: pthread_t?

    /// Binds the socket at `socketPath` in `directory` (see
    /// ``ControlSocket/listen(at:)``); the thread starts with ``start()``.
    ///
    /// - Throws: `BundleError.io` naming the directory or socket.
    package init(controller: any ControlledService, socketPath: [UInt8], directory: [UInt8]) throws {
        self.controller = controller
        unlocks = UnlockWorker(controller: controller)
        try ControlSocket.prepareDirectory(directory)
        self.socketPath = socketPath
        let (listener, swept) = try StaleControlSockets.withLock(on: directory) {
            (try ControlSocket.listen(at: socketPath), StaleControlSockets.sweep(directory))
        }
        self.listener = listener
        if swept > 0 {
            controller.log("info", "removed \(swept) control socket\(swept == 1 ? "" : "s") of killed daemons in "
                           + String(decoding: directory, as: UTF8.self))
        }
        wake = try FileDescriptor.pipe(closeOnExec: true)
    }

    deinit {
        _ = socketPath.withCString { unlink($0) }
    }

    /// The control thread's name (comm), told apart from the FUSE workers
    /// in ps and /proc/PID/task.
    package static let threadName = "encfs-control"

    /// Starts serving on a new thread, every signal blocked
    /// (``ServiceThread``), as libfuse starts its workers.
    ///
    /// - Throws: `BundleError.io` when the thread cannot be made.
    package func start() throws {
        thread = try ServiceThread.start(named: Self.threadName, operation: "start control thread") { [self] in loop() }
    }

    /// Ends the thread (after the client it is serving, if any, and the
    /// unlock being tried) and removes the socket.
    package func stop() {
        var byte: UInt8 = 1
        _ = write(wake.write.rawValue, &byte, 1)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        unlocks.join()
        _ = socketPath.withCString { unlink($0) }
    }

    private func loop() {
        let idleTimer = controller.lockSettings.idleLockSeconds != nil
        while true {
            var fds = [pollfd(fd: listener.rawValue, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.read.rawValue, events: Int16(POLLIN), revents: 0)]
            let ready = SystemCall.retryingInterrupts { poll(&fds, 2, idleTimer ? 1000 : -1) }
            if ready < 0 { return }
            if fds[1].revents != 0 { return }
            if fds[0].revents & Int16(POLLIN) != 0 {
                // accept4 is not imported; this process starts no programs
                // but fusermount3 at unmount, after this thread has ended.
                let fd = accept(listener.rawValue, nil, nil)
                if fd >= 0 {
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                    serve(FileDescriptor(taking: fd))
                }
            }
            controller.lockIfIdle()
        }
    }

    /// Answers one client: checks who it is, reads its request, replies.
    private func serve(_ client: FileDescriptor) {
        ControlSocket.setTimeouts(client)
        // Read first, so that a refused client gets the reply rather than
        // a reset connection; nothing in it is used before the check.
        guard let request = try? ControlProtocol.receive(from: client) else { return }
        guard let uid = ControlSocket.peerCredentials(of: client)?.uid, uid == 0 || uid == getuid() else {
            // The 0600 socket in a 0700 directory stops others first; this
            // covers a socket reached some other way (a passed descriptor,
            // a mode changed by hand).
            let who = controller.kind == "mount" ? "who mounted" : "who started it"
            Self.reply(.refused(.permissionDenied, "permission denied: only the user \(who), or root, may control this \(controller.kind)"),
                       to: client)
            return
        }
        request.withUnsafeBytes { body in
            guard let code = body.first.flatMap(ControlProtocol.Request.init(rawValue:)) else {
                return Self.reply(.refused(.unknownRequest, "unknown request"), to: client)
            }
            do {
                switch code {
                case .status:
                    Self.reply(.ok(controller.status), to: client)
                case .accessLog:
                    Self.reply(.ok(controller.accessLog), to: client)
                case .lock, .forceLock:
                    // A client that gave up waiting (it said so to its
                    // user) is not obeyed afterwards.
                    guard !ControlSocket.peerHasGone(client) else { return }
                    let open = try controller.lock(force: code == .forceLock, reason: "requested")
                    Self.reply(.ok(String(open)), to: client)
                case .unlock:
                    if try !unlocks.start(request, for: client) {
                        Self.reply(.refused(.unlockInProgress, "another unlock is being tried: wait for its answer"), to: client)
                    }
                }
            } catch {
                Self.reply(ControlProtocol.Reply(refusing: error), to: client)
            }
        }
    }

    /// Sends one reply frame; a client that has gone is not an error.
    package static func reply(_ reply: ControlProtocol.Reply, to client: FileDescriptor) {
        _ = try? reply.encoded.withUnsafeBytes { try ControlProtocol.send($0, to: client) }
    }
}
