/// A byte source with more to tell a mount's `status` than its size: a
/// remote bundle's sources (their state, bytes and errors).
///
/// The mount, which knows nothing of HTTP, appends these `key=value`
/// fields to its status reply; `encfs-ctl` shows them.
package protocol StatusReportingSource: AnyObject {
    /// Fields in order; keys without `=` or newlines, values without
    /// newlines.
    var statusFields: [(String, String)] { get }
}

/// A byte source that records which of a bundle's files were read and can
/// fetch a list of them ahead (a remote bundle: `encfs-ctl MNT
/// access-log`, `--prefetch-list`).
package protocol AccessRecordingSource: AnyObject {
    /// The files read since the source was opened, with the chunks read
    /// of each (ranges of chunk numbers), in index order.
    func accessLog(with reader: BundleReader) -> [(path: [UInt8], chunks: [Range<UInt64>])]

    /// Once the reader is open: starts fetching, in the background, the
    /// files of the list the source was given (nothing when none). The
    /// reader is used only during the call.
    func startPrefetch(with reader: BundleReader)
}
