/// How a packer lays out the index (docs/FORMAT.md).
package enum IndexLayout: Sendable, Equatable {
    /// Paged when the bundle is version 2 for another reason (compression,
    /// shared bodies) or has more than `PagedIndexWriter.entryThreshold`
    /// entries; flat otherwise, so small plain bundles stay version 1.
    case automatic
    /// One sealed message, authenticated and checked whole at open (what
    /// version 1 readers read).
    case flat
    /// Pages sealed one by one, opened and checked at first use (version 2).
    case paged

    /// Whether a bundle with these features and entries gets a paged index.
    func isPaged(features: BundleFeatures, entryCount: Int) -> Bool {
        switch self {
        case .automatic: PagedIndexWriter.isPaged(features: features, entryCount: entryCount)
        case .flat: false
        case .paged: true
        }
    }
}
