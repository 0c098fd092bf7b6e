#if canImport(Glibc)
import Glibc
#endif

/// What an `encfs_list` handle holds: names packed NUL-terminated into one
/// malloc'd block, and where each starts, so that `encfs_list_name` hands
/// out stable pointers without copying.
final class NameList {
    private let storage: UnsafeMutablePointer<CChar>
    private let offsets: [Int]
    private let lengths: [Int]

    /// Packs `names`; nil when memory runs out.
    init?(_ names: [[UInt8]]) {
        let total = names.reduce(0) { $0 + $1.count + 1 }
        // malloc(0) may return NULL: ask for at least one byte.
        guard let block = malloc(max(total, 1))?.assumingMemoryBound(to: CChar.self) else { return nil }
        var offsets: [Int] = []
        offsets.reserveCapacity(names.count)
        var at = 0
        for name in names {
            offsets.append(at)
            name.withUnsafeBytes { raw in
                if let base = raw.baseAddress { memcpy(block + at, base, raw.count) }
            }
            block[at + name.count] = 0
            at += name.count + 1
        }
        storage = block
        self.offsets = offsets
        lengths = names.map(\.count)
    }

    deinit { free(storage) }

    var count: Int { offsets.count }

    /// Name `index` and its length, or nil out of range.
    func name(at index: Int) -> (UnsafePointer<CChar>, Int)? {
        guard index >= 0, index < offsets.count else { return nil }
        return (UnsafePointer(storage + offsets[index]), lengths[index])
    }
}

@_cdecl("encfs_list_count")
public func encfs_list_count(_ handle: OpaquePointer?) -> Int {
    guard let handle else { return 0 }
    return Unmanaged<NameList>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue().count
}

@_cdecl("encfs_list_name")
public func encfs_list_name(_ handle: OpaquePointer?, _ index: Int, _ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
    guard let handle else { return nil }
    let list = Unmanaged<NameList>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
    guard let (name, count) = list.name(at: index) else { return nil }
    length?.pointee = count
    return name
}

@_cdecl("encfs_list_free")
public func encfs_list_free(_ handle: OpaquePointer?) {
    guard let handle else { return }
    Unmanaged<NameList>.fromOpaque(UnsafeRawPointer(handle)).release()
}
