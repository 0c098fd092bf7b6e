/// When a mount's keys go away (`--protection`), after the data
/// protection classes of the platform these bundles came from.
package enum ProtectionClass: String, Sendable, Equatable, CaseIterable {
    /// Keys are wiped at lock; reads on handles opened before answer
    /// ENOKEY from then on.
    case complete
    /// Keys are wiped at lock except those of files open at that moment,
    /// which keep reading until their handle closes (then their key goes).
    case unlessOpen = "unless-open"
    /// Keys stay until the mount ends (today's behaviour); `encfs-ctl lock`
    /// needs `--force`.
    case untilUnmount = "until-unmount"
}

/// How a mount locks and where it is controlled from: the lock part of
/// `MountConfiguration`.
package struct LockSettings: Sendable, Equatable {
    /// `--protection`.
    package var protection: ProtectionClass = .untilUnmount
    /// `--idle-lock`: lock after this many seconds without a read, open,
    /// lookup or listing; nil never.
    package var idleLockSeconds: Int?
    /// `--start-locked`: mount without a key; nothing is served until the
    /// first `encfs-ctl unlock`.
    package var startsLocked = false
    /// The 0700 directory the control socket goes in (`/run/encfs` for
    /// root, `$XDG_RUNTIME_DIR/encfs` otherwise); nil: no control socket.
    package var controlDirectory: [UInt8]?

    package init() {}

    /// Whether every open and opendir must be answered by the daemon (never
    /// ENOSYS-skipped): a mount that may lock needs per-handle state
    /// (counting handles, failing reads of a locked handle, an open
    /// refused while locked). The one predicate for this; an access policy
    /// adds its own reason where the two are merged (MountContext).
    package var needsEveryOpen: Bool {
        protection != .untilUnmount || idleLockSeconds != nil || startsLocked
    }
}
