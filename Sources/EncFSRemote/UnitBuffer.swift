/// The memory one fetch unit is fetched into: the read that claimed the
/// unit copies its own bytes out and returns, while the rest of the unit
/// arrives in the background (``RemoteBundleSource``); whoever finishes
/// last frees it.
///
/// `@unchecked Sendable`: each request of the unit writes its own byte
/// range, once; a reader reads only the range its own request wrote, and
/// the unit is stored whole only after every request ended
/// (``UnitAssembly``, whose lock orders those writes before the read).
final class UnitBuffer: @unchecked Sendable {
    let count: Int
    private let bytes: UnsafeMutableRawBufferPointer

    init(count: Int) {
        self.count = count
        bytes = .allocate(byteCount: max(count, 1), alignment: 16)
    }

    deinit { bytes.deallocate() }

    /// `range` of the unit's bytes.
    func slice(_ range: Range<Int>) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: bytes[range])
    }
}
