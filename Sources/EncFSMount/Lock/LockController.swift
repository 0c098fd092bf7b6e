import EncFSCore
import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// Locks and unlocks a mount and describes its state: what the control
/// socket's requests and the idle timer do, on the control thread (an
/// unlock on a thread of its own, ``UnlockWorker``).
final class LockController: ControlledService {
    let context: MountContext
    /// The FUSE session, for invalidating the kernel's caches.
    private let session: SessionPointer
    let mountpoint: [UInt8]

    /// A `fuse_session` pointer, which libfuse lets any thread send
    /// notifications through.
    struct SessionPointer: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    init(context: MountContext, session: OpaquePointer, mountpoint: [UInt8]) {
        self.context = context
        self.session = SessionPointer(pointer: session)
        self.mountpoint = mountpoint
    }

    /// Locks the mount: wipes every key, decrypted chunk, index page and
    /// reply buffer, and makes the kernel drop its cached pages and names.
    ///
    /// - Parameters:
    ///   - force: lock even under `until-unmount`.
    ///   - reason: for the log line ("requested", "idle").
    /// - Returns: the handles still open.
    /// - Throws: ``ControlRefusal`` under `until-unmount` without `force`.
    func lock(force: Bool, reason: String) throws -> Int {
        guard force || context.lockSettings.protection != .untilUnmount else {
            throw ControlRefusal(.lockNeedsForce,
                                 "the mount's protection is until-unmount: lock it with --force, or mount with --protection complete")
        }
        if let taken = context.bundle.takeReader() {
            // Every inode the kernel still holds, whenever it was handed
            // out (a descriptor opened before an earlier lock reads again
            // after the unlock without a lookup); the root's listing and
            // attributes too, though it was never looked up.
            let positions = [0] + context.bundle.seen.positions.filter { $0 != 0 }
            KernelCacheInvalidation.invalidate(session.pointer, positions: positions, reader: taken)
            // Replies decrypted into FUSE ring entries (uring transport).
            context.transport.wipeRingBuffers()
            // `taken` is the last reference: the reader, its keys and its
            // index pages are wiped as it goes.
            context.logger.log("info", "locked (\(reason)), \(openHandles.map(String.init) ?? "unknown") handles open",
                               path: mountpoint)
        }
        return openHandles ?? 0
    }

    /// Unlocks with the secrets of an unlock request: the bundle is opened
    /// again from its source and checked as at mount. Runs on the unlock
    /// thread (``UnlockWorker``), never the control thread; see
    /// ``ControlledService/unlockBundle(with:locksBefore:stillWanted:)``.
    func unlock(with secrets: UnsafeRawBufferPointer, locksBefore: Int, stillWanted: () -> Bool) throws -> String {
        try unlockBundle(with: secrets, locksBefore: locksBefore, stillWanted: stillWanted)
    }

    var kind: String { "mount" }
    var bundle: LockableBundle { context.bundle }
    var lockSettings: LockSettings { context.lockSettings }

    func log(_ level: String, _ message: String) {
        context.logger.log(level, message, path: mountpoint)
    }

    /// Handles open now; nil when the kernel skips opens (so none are
    /// counted).
    var openHandles: Int? {
        let skipped = (context.kernelSkipsOpen.load(ordering: .relaxed) || context.kernelSkipsOpendir.load(ordering: .relaxed))
            && !context.answersEveryOpen
        return skipped ? nil : max(0, context.bundle.openHandles.load(ordering: .relaxed))
    }

    /// The `access-log` reply (``ControlProtocol/Request/accessLog``);
    /// empty for a local bundle or a locked mount.
    var accessLog: String { sourceAccessLog }

    /// The `status` reply: ``ControlProtocol/StatusField`` lines.
    var status: String {
        let settings = context.lockSettings
        let fields: [(String, String)] = [
            (ControlProtocol.StatusField.state, context.bundle.isLocked ? "locked" : "unlocked"),
            (ControlProtocol.StatusField.protection, settings.protection.rawValue),
            (ControlProtocol.StatusField.openHandles, openHandles.map(String.init) ?? "unknown"),
            (ControlProtocol.StatusField.idleLock, String(settings.idleLockSeconds ?? 0)),
            (ControlProtocol.StatusField.idleSeconds, String(context.bundle.activity.idleSeconds)),
            // One line per field: a newline in the path becomes "?".
            (ControlProtocol.StatusField.mountpoint, String(decoding: mountpoint.map { $0 == 0x0A ? 0x3F : $0 }, as: UTF8.self)),
            (ControlProtocol.StatusField.transport, context.transport.name),
            (ControlProtocol.StatusField.ringRequests, String(context.transport.ringRequests)),
            (ControlProtocol.StatusField.polledRequests, String(context.transport.polledRequests)),
        ] + ((context.bundle.source as? StatusReportingSource)?.statusFields ?? [])
        return fields.map { "\($0.0)=\($0.1)\n" }.joined()
    }
}
