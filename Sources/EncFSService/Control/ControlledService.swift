import EncFSCore
import CryptCore

/// What a control socket controls: a mount (EncFSMount's `LockController`)
/// or a server (EncFSServe's `ServeControl`). ``ControlServer`` and
/// ``UnlockWorker`` speak the protocol and call these; what a lock does
/// beyond taking the reader away (the kernel's caches of a mount) and what
/// the status says are the service's own.
package protocol ControlledService: AnyObject, Sendable {
    /// "mount" or "server", for messages.
    var kind: String { get }
    /// The bundle that locks.
    var bundle: LockableBundle { get }
    /// `--protection`, `--idle-lock`, `--start-locked`.
    var lockSettings: LockSettings { get }
    /// The `status` reply: ``ControlProtocol/StatusField`` lines.
    var status: String { get }
    /// The `access-log` reply (``ControlProtocol/Request/accessLog``).
    var accessLog: String { get }
    /// Locks.
    ///
    /// - Parameters:
    ///   - force: lock even under `until-unmount`.
    ///   - reason: for the log line ("requested", "idle").
    /// - Returns: the handles still open (0 when the service has none).
    /// - Throws: ``ControlRefusal`` under `until-unmount` without `force`.
    func lock(force: Bool, reason: String) throws -> Int
    /// Unlocks with an unlock request's secrets (on the unlock thread).
    ///
    /// - Throws: ``ControlRefusal`` naming why not.
    func unlock(with secrets: UnsafeRawBufferPointer, locksBefore: Int, stillWanted: () -> Bool) throws -> String
    /// One log line.
    func log(_ level: String, _ message: String)
}

extension ControlledService {
    /// Locks when `--idle-lock` is set, the bundle is unlocked and nothing
    /// used it for that long. Called about once a second.
    package func lockIfIdle() {
        guard let limit = lockSettings.idleLockSeconds, bundle.activity.idleSeconds >= limit,
              !bundle.isLocked else { return }
        _ = try? lock(force: true, reason: "idle for \(limit) s")
    }

    /// The unlock every service does: at most five failed secrets a minute
    /// (``UnlockRateLimit``), each secret of a failed request counting (a
    /// request that would go over is refused without trying any, one with
    /// more than five always); then the bundle is opened again from its
    /// source and checked as at start (``LockableBundle/unlock(with:unlessLockedSince:stillWanted:)``).
    ///
    /// - Parameters:
    ///   - locksBefore: the bundle's ``LockableBundle/lockCount`` when the
    ///     request came: a lock asked for since wins.
    ///   - stillWanted: asked before the new reader is served; false (the
    ///     client has gone) drops it.
    /// - Returns: what to tell the client.
    /// - Throws: ``ControlRefusal`` naming why.
    package func unlockBundle(with secrets: UnsafeRawBufferPointer, locksBefore: Int,
                              stillWanted: () -> Bool) throws -> String {
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
            log("info", "unlock dropped: the \(kind) was locked while the key was tried")
            throw ControlRefusal(.lockedMeanwhile, "the \(kind) was locked while the key was tried: it stays locked")
        case .abandoned:
            log("info", "unlock dropped: its client has gone")
            throw ControlRefusal(.clientGone, "the client has gone")
        case .unlocked:
            bundle.activity.touch()
            log("info", "unlocked")
            return "unlocked"
        }
    }

    /// Records `failedSecrets` failures, logs the refusal and returns it.
    private func refuseUnlock(_ error: any Error, failedSecrets: Int) -> ControlRefusal {
        bundle.unlockAttempts.withLock { $0.recordFailure(secrets: failedSecrets, now: ActivityClock.now()) }
        let refusal = ControlRefusal(error)
        log("warning", "unlock refused: \(refusal.message)")
        return refusal
    }

    /// The `access-log` of a remote bundle's source: one line per file,
    /// the path in hex, a tab, `first-last,…`; empty for a local bundle or
    /// while locked.
    package var sourceAccessLog: String {
        guard let source = bundle.source as? AccessRecordingSource else { return "" }
        let hex = Array("0123456789abcdef".utf8)
        let log = bundle.withReader { source.accessLog(with: $0) } ?? []
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
}
