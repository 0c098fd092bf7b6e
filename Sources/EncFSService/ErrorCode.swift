import EncFSCore

/// What went wrong, as the one byte that crosses a process boundary: the
/// daemon's verdict pipe (``MountDaemon``) and a control reply's first
/// byte (``ControlProtocol``). The message travels beside it for people;
/// the meaning (exit status, hint) is derived from the code on the other
/// side, never from the text (EncFSCLI's `ErrorCode+Presentation.swift`
/// holds that table). Both ends are binaries of the same build, so the
/// values may change between releases; 0 is never a code (it says "ok").
package enum ErrorCode: UInt8, CaseIterable, Sendable {
    // MARK: The bundle (``BundleError``, one code per case)

    case notABundle = 1
    case unsupportedVersion = 2
    case corruptHeader = 3
    case headerAuthenticationFailed = 4
    case wrongKey = 5
    case corruptIndex = 6
    case lengthMismatch = 7
    case corruptChunk = 8
    case notFound = 9
    case notADirectory = 10
    case isADirectory = 11
    case io = 12
    case sourceChanged = 13
    case limitExceeded = 14
    case crypto = 15
    case slotsNotCarriedOver = 16
    case externalSymlink = 17
    case scryptMemoryLimit = 18
    case notSigned = 19
    case untrustedSigner = 20
    case badSignature = 21
    case unsupportedSignature = 22
    case unexpectedBundleID = 23
    case noKeyGiven = 24
    case invalidCompressionLevel = 25
    case invalidChunkSize = 26
    case sourceUnreadable = 27
    case unknownSlot = 28
    case lastSlotRemoved = 29
    case removedSlotKeyGiven = 30
    case bundleReplaced = 31

    // MARK: The mount daemon (``MountError``)

    /// The daemon read no whole key from its key pipe.
    case keyNotReceived = 64
    /// `--transport uring` cannot serve here.
    case transportUnavailable = 65

    // MARK: The control socket

    /// The peer is neither the user who mounted nor root.
    case permissionDenied = 96
    /// A request code this daemon does not know.
    case unknownRequest = 97
    /// `lock` under `--protection until-unmount` without `--force`.
    case lockNeedsForce = 98
    /// An unlock request with more secrets than a minute's failures allow.
    case tooManySecrets = 99
    /// Too many failed secrets in the last minute.
    case rateLimited = 100
    /// Another unlock is being tried.
    case unlockInProgress = 101
    /// A lock came while the unlock's secrets were tried.
    case lockedMeanwhile = 102
    /// The unlock's client closed its connection before the answer.
    case clientGone = 103
    /// Found by `encfs-ctl` itself, never sent: no socket for the mountpoint.
    case noControlSocket = 104

    /// An error of another type (its description is the message).
    case other = 255

    /// The code of any error the daemon reports: a ``BundleError`` or a
    /// ``MountError`` by its case, a control refusal by its code.
    package init(_ error: any Error) {
        switch error {
        case let error as BundleError: self.init(error)
        case let error as MountError: self = error.code
        case let error as ControlRefusal: self = error.code
        default: self = .other
        }
    }

    /// The code of `error`'s case.
    package init(_ error: BundleError) {
        switch error {
        case .notABundle: self = .notABundle
        case .unsupportedVersion: self = .unsupportedVersion
        case .corruptHeader: self = .corruptHeader
        case .headerAuthenticationFailed: self = .headerAuthenticationFailed
        case .wrongKey: self = .wrongKey
        case .corruptIndex: self = .corruptIndex
        case .lengthMismatch: self = .lengthMismatch
        case .corruptChunk: self = .corruptChunk
        case .notFound: self = .notFound
        case .notADirectory: self = .notADirectory
        case .isADirectory: self = .isADirectory
        case .io: self = .io
        case .sourceChanged: self = .sourceChanged
        case .limitExceeded: self = .limitExceeded
        case .crypto: self = .crypto
        case .slotsNotCarriedOver: self = .slotsNotCarriedOver
        case .externalSymlink: self = .externalSymlink
        case .scryptMemoryLimit: self = .scryptMemoryLimit
        case .notSigned: self = .notSigned
        case .untrustedSigner: self = .untrustedSigner
        case .badSignature: self = .badSignature
        case .unsupportedSignature: self = .unsupportedSignature
        case .unexpectedBundleID: self = .unexpectedBundleID
        case .noKeyGiven: self = .noKeyGiven
        case .invalidCompressionLevel: self = .invalidCompressionLevel
        case .invalidChunkSize: self = .invalidChunkSize
        case .sourceUnreadable: self = .sourceUnreadable
        case .unknownSlot: self = .unknownSlot
        case .lastSlotRemoved: self = .lastSlotRemoved
        case .removedSlotKeyGiven: self = .removedSlotKeyGiven
        case .bundleReplaced: self = .bundleReplaced
        }
    }
}

/// Why the daemon refused a control request: its code and one lowercase
/// line for the client.
package struct ControlRefusal: Error, Sendable {
    package let code: ErrorCode
    package let message: String

    package init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The refusal for any error: its code and its message.
    package init(_ error: any Error) {
        if let error = error as? ControlRefusal {
            self = error
        } else {
            self.init(ErrorCode(error), (error as? BundleError)?.message ?? (error as? MountError)?.message ?? "\(error)")
        }
    }
}
