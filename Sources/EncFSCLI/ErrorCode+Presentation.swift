import EncFSCore
import EncFSService

extension ErrorCode {
    /// The one table from what went wrong to what a command shows: its
    /// exit status and its `hint:` line. Errors found in this process and
    /// those a daemon reports (verdict pipe, control reply) go through it
    /// alike, by code, never by their message. (The errno of a bundle
    /// error is `BundleError.errno`, the only translation the mount uses.)
    ///
    /// - Parameter error: the error itself when this process has it, for
    ///   a hint that names a figure it carries (the scrypt memory a slot
    ///   needs); nil when only the code came across.
    package func presentation(of error: BundleError? = nil) -> (exitCode: Int32, hint: String?) {
        let failure = ExitCode.failure
        switch self {
        case .externalSymlink:
            return (failure, "to accept such links (served as they are stored), add \(ReaderOptions.allowExternalSymlinks)")
        case .scryptMemoryLimit:
            guard case .scryptMemoryLimit(_, let needs, _)? = error else { return (failure, nil) }
            return (failure, "if you trust this bundle, allow more with \(ReaderOptions.scryptMaxMemory) SIZE "
                        + "(this slot needs \(ReaderOptions.sizeOption(needs)))")
        case .notSigned:
            return (failure, "a bundle is signed by encfs-pack --sign-key (or encfs-inspect rekey --sign-key); "
                        + "without a signature anyone with a recipient's public key can make a bundle that opens")
        case .untrustedSigner:
            return (failure, "encfs-inspect info shows a bundle's signer; pass its public key with \(ReaderOptions.verifyKey) "
                        + "only if you trust it")
        case .lockNeedsForce: return (failure, "encfs-ctl MOUNTPOINT lock --force")
        case .noControlSocket: return (failure, "is it mounted with encfs-mount by this user? (root finds root's mounts in /run/encfs)")
        case .notABundle, .unsupportedVersion, .corruptHeader, .headerAuthenticationFailed, .wrongKey, .corruptIndex,
             .lengthMismatch, .corruptChunk, .notFound, .notADirectory, .isADirectory, .io, .sourceChanged, .limitExceeded,
             .crypto, .slotsNotCarriedOver, .badSignature, .unsupportedSignature, .unexpectedBundleID, .noKeyGiven,
             .invalidCompressionLevel, .invalidChunkSize, .sourceUnreadable, .unknownSlot, .lastSlotRemoved,
             .removedSlotKeyGiven, .bundleReplaced, .keyNotReceived, .transportUnavailable, .permissionDenied,
             .unknownRequest, .tooManySecrets, .rateLimited, .unlockInProgress, .lockedMeanwhile, .clientGone, .other:
            return (failure, nil)
        }
    }

    /// The hint for `error`, found here or reported by a daemon.
    package static func hint(for error: any Error) -> String? {
        let code = (error as? CommandError)?.code ?? ErrorCode(error)
        return code.presentation(of: error as? BundleError).hint
    }
}
