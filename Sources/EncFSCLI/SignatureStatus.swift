import EncFSCore

/// How `encfs-inspect info` describes a bundle's signature, in text and
/// in JSON.
struct SignatureStatus {
    /// How far the signature was checked.
    enum Check: String {
        /// Not at all: no `--verify-key` was given.
        case none
        /// Over the header's fields and the sealed index, without a key:
        /// whether the content key is the one signed is not known.
        case headerAndIndex = "header-and-index"
        /// All of it, the content key included (opened with a key).
        case full
    }

    private let signer: String?
    private let unsupportedVersion: UInt8?
    private let check: Check

    /// - Parameters:
    ///   - header: the bundle's header.
    ///   - verified: nil when no verifying key was given; else whether the
    ///     bundle was opened with a key (full check) or not (header and
    ///     index). The caller has already refused a bundle that failed.
    init(header: BundleHeader, verified: Bool?) {
        do {
            signer = try header.signature()?.signerFingerprint
            unsupportedVersion = nil
        } catch {
            signer = nil
            unsupportedVersion = header.signatureSlot?.body.first
        }
        check = verified.map { $0 ? .full : .headerAndIndex } ?? .none
    }

    /// One line after `signature:`.
    var text: String {
        if let unsupportedVersion { return "version \(unsupportedVersion) (this build checks version 1; not checked)" }
        guard let signer else { return "none" }
        switch check {
        case .none: return "ed25519, signer \(signer) (not checked: give --verify-key)"
        case .headerAndIndex: return "ed25519, signer \(signer), verified over the header and index (give a key to check the content key too)"
        case .full: return "ed25519, signer \(signer), verified"
        }
    }

    /// A JSON value: null, or an object with the signer and the check.
    var json: JSONValue {
        if let unsupportedVersion { return .object([("version", .number(unsupportedVersion)), ("checked", "none")]) }
        guard let signer else { return .null }
        return .object([("algorithm", "ed25519"), ("signer", .string(signer)), ("checked", .string(check.rawValue))])
    }
}
