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
