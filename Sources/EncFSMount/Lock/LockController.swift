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
final class LockController: Sendable {
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
    /// thread (``UnlockWorker``), never the control thread.
    ///
    /// At most five failed secrets a minute (``UnlockRateLimit``), each
    /// secret of a failed request counting: a request that would go over
    /// is refused without trying any, one with more than five always.
    ///
    /// - Parameters:
    ///   - locksBefore: the bundle's ``LockableBundle/lockCount`` when the
    ///     request came: a lock asked for since wins, and the mount stays
    ///     locked, as that lock's client was told.
    ///   - stillWanted: asked before the new reader is served; false (the
    ///     client has gone) drops it, so that nobody is told one thing
    ///     while the mount does another.
    /// - Returns: what to tell the client.
    /// - Throws: ``ControlRefusal`` naming why.
    func unlock(with secrets: UnsafeRawBufferPointer, locksBefore: Int, stillWanted: () -> Bool) throws -> String {
        let bundle = context.bundle
        let materials: [KeyMaterial]
        do { materials = try ControlProtocol.secrets(in: secrets) } catch { throw refuseUnlock(error, failedSecrets: 1) }
        guard materials.count <= UnlockRateLimit.allowedFailures else {
            throw ControlRefusal(.tooManySecrets, "an unlock request may carry at most \(UnlockRateLimit.allowedFailures) secrets")
        }
        let wait = bundle.unlockAttempts.withLock { $0.waitBeforeAttempt(secrets: materials.count, now: ActivityClock.now()) }
        guard wait == 0 else {
            throw ControlRefusal(.rateLimited, "too many failed unlocks: try again in \(wait) s")
        }
        let outcome: LockableBundle.UnlockOutcome
        do { outcome = try bundle.unlock(with: materials, unlessLockedSince: locksBefore, stillWanted: stillWanted) } catch {
            throw refuseUnlock(error, failedSecrets: materials.count)
        }
        switch outcome {
        case .alreadyUnlocked: return "already unlocked"
        case .lockedMeanwhile:
            context.logger.log("info", "unlock dropped: the mount was locked while the key was tried", path: mountpoint)
            throw ControlRefusal(.lockedMeanwhile, "the mount was locked while the key was tried: it stays locked")
        case .abandoned:
            context.logger.log("info", "unlock dropped: its client has gone", path: mountpoint)
            throw ControlRefusal(.clientGone, "the client has gone")
        case .unlocked:
            bundle.activity.touch()
            context.logger.log("info", "unlocked", path: mountpoint)
            return "unlocked"
        }
    }

    /// Records `failedSecrets` failures, logs the refusal and returns it.
    private func refuseUnlock(_ error: any Error, failedSecrets: Int) -> ControlRefusal {
        context.bundle.unlockAttempts.withLock { $0.recordFailure(secrets: failedSecrets, now: ActivityClock.now()) }
        let refusal = ControlRefusal(error)
        context.logger.log("warning", "unlock refused: \(refusal.message)", path: mountpoint)
        return refusal
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
    var accessLog: String {
        guard let source = context.bundle.source as? AccessRecordingSource else { return "" }
        let hex = Array("0123456789abcdef".utf8)
        let log = context.bundle.withReader { source.accessLog(with: $0) } ?? []
        var reply = ""
        for file in log {
            let path = String(decoding: file.path.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
            let line = path + "\t" + file.chunks.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",") + "\n"
            // One reply frame (ControlProtocol.maximumFrameLength): the
            // files read first are kept.
            guard reply.utf8.count + line.utf8.count < ControlProtocol.maximumFrameLength - 1024 else { break }
            reply += line
        }
        return reply
    }

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

    /// Locks when `--idle-lock` is set, the mount is unlocked and nothing
    /// used it for that long. Called about once a second.
    func lockIfIdle() {
        guard let limit = context.lockSettings.idleLockSeconds, context.bundle.activity.idleSeconds >= limit,
              !context.bundle.isLocked else { return }
        _ = try? lock(force: true, reason: "idle for \(limit) s")
    }
}
