import EncFSCore
extension EncryptedBundle {
    /// The part of a bundle that failed its checks, in
    /// ``EncryptedBundleError/damagedBundle(_:reason:)``.
    public enum DamagedPart: Sendable, Hashable, CustomStringConvertible {
        /// The header: a malformed field or key slot, or a header that
        /// fails authentication under the unlocked key.
        case header
        /// The encrypted index (names, sizes, the tree): it failed
        /// authentication or validation.
        case index
        /// The file is shorter or longer than its authenticated header
        /// records (truncated or extended).
        case fileLength

        public var description: String {
            switch self {
            case .header: return "header"
            case .index: return "index"
            case .fileLength: return "length"
            }
        }
    }
}
