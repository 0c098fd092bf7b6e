import EncFSCore
import EncFSService
#if canImport(Glibc)
import Glibc
#endif

/// The lock options of `encfs-mount` and `encfs-serve` (`--protection`,
/// `--idle-lock`, `--start-locked`) and where the control socket goes,
/// parsed once for the command and written back for a mount's daemon.
package enum LockOptions {
    package static let protection = "--protection"
    package static let idleLock = "--idle-lock"
    package static let startLocked = "--start-locked"

    package static let parserOptions: [ArgumentParser.Option] = [
        .init([protection], takesValue: true),
        .init([idleLock], takesValue: true),
        .init([startLocked], takesValue: false),
        .init([controlDirectoryOption], takesValue: true),
    ]

    package static let help = """
      --protection CLASS       when keys go away (encfs-ctl MOUNTPOINT lock):
                               complete: at lock, for every file;
                               unless-open: at lock, except files open then,
                               whose keys go when they close;
                               until-unmount (default): only at unmount, and
                               encfs-ctl lock needs --force
      --idle-lock DURATION     lock after DURATION without reads, opens or
                               listings: 90s, 15m, 1h (implies --protection
                               complete unless another class is given)
      --start-locked           mount without a key: nothing is served (ENOKEY)
                               until encfs-ctl MOUNTPOINT unlock; no key
                               options then
    """

    /// The lock settings in `args`, with the control directory for this
    /// user (from `$XDG_RUNTIME_DIR` unless root); a mount's daemon
    /// (`inDaemon`) takes the directory only from its argv, as the command
    /// found it.
    ///
    /// - Throws: `UsageError` for a bad class or duration, or lock options
    ///   without anywhere to put the control socket.
    package static func settings(from args: ArgumentParser.Result, inDaemon daemon: Bool = false) throws -> LockSettings {
        var settings = LockSettings()
        if let text = args.value(protection) {
            guard let value = ProtectionClass(rawValue: String(decoding: text, as: UTF8.self)) else {
                throw UsageError("\(protection) must be complete, unless-open or until-unmount")
            }
            settings.protection = value
        }
        if let text = args.value(idleLock) {
            guard let seconds = duration(text) else {
                throw UsageError("\(idleLock) must be a duration from 1s to 7d, such as 90s, 15m or 1h")
            }
            guard settings.protection != .untilUnmount || args.value(protection) == nil else {
                throw UsageError("\(idleLock) cannot be used with \(protection) until-unmount")
            }
            if args.value(protection) == nil { settings.protection = .complete }
            settings.idleLockSeconds = seconds
        }
        settings.startsLocked = args.has(startLocked)
        if settings.startsLocked, KeyOptions.parserOptions.contains(where: { args.has($0.names[0]) }) {
            throw UsageError("\(startLocked) takes no key options: unlock with encfs-ctl MOUNTPOINT unlock")
        }
        settings.controlDirectory = daemon ? args.value(controlDirectoryOption)
            : ControlSocket.directory(uid: getuid(), runtimeDirectory: runtimeDirectory())
        if settings.controlDirectory == nil, settings.needsEveryOpen {
            throw UsageError("\(protection), \(idleLock) and \(startLocked) need a control socket, and XDG_RUNTIME_DIR is not set")
        }
        return settings
    }

    /// `$XDG_RUNTIME_DIR`, if set (a path, not a secret).
    package static func runtimeDirectory() -> [UInt8]? {
        guard let value = getenv("XDG_RUNTIME_DIR"), value.pointee != 0 else { return nil }
        return Array(UnsafeRawBufferPointer(start: value, count: strlen(value)))
    }

    /// `text` as seconds: a number with the unit s, m, h or d, from 1 s to
    /// 7 days.
    package static func duration(_ text: [UInt8]) -> Int? {
        guard let unit = text.last, let number = Int(String(decoding: text.dropLast(), as: UTF8.self)), number > 0 else { return nil }
        let scale: Int
        switch unit {
        case UInt8(ascii: "s"): scale = 1
        case UInt8(ascii: "m"): scale = 60
        case UInt8(ascii: "h"): scale = 3600
        case UInt8(ascii: "d"): scale = 86400
        default: return nil
        }
        let (seconds, overflow) = number.multipliedReportingOverflow(by: scale)
        guard !overflow, seconds <= 7 * 86400 else { return nil }
        return seconds
    }

    /// The daemon's argv for `settings` (the control directory travels as
    /// a hidden option: the daemon must not read the environment again).
    package static func daemonArguments(_ settings: LockSettings) -> [[UInt8]] {
        var out: [[UInt8]] = [Array(protection.utf8), Array(settings.protection.rawValue.utf8)]
        if let seconds = settings.idleLockSeconds { out += [Array(idleLock.utf8), Array("\(seconds)s".utf8)] }
        if settings.startsLocked { out.append(Array(startLocked.utf8)) }
        if let directory = settings.controlDirectory { out += [Array(controlDirectoryOption.utf8), directory] }
        return out
    }

    /// The control directory as the command found it, for the daemon only.
    package static let controlDirectoryOption = "--internal-control-directory"
}
