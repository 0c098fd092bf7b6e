/// Little-endian loads and stores on raw buffers, bounds-checked by the
/// caller's slicing: every reader of untrusted bytes goes through
/// ``ByteCursor``, which checks each length before it reads.
struct ByteCursor {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset: Int = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    /// Takes `count` bytes, or throws `error` when fewer remain.
    mutating func take(_ count: Int, orThrow error: @autoclosure () -> BundleError) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw error() }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
        offset += count
        return slice
    }

    mutating func u8(orThrow error: @autoclosure () -> BundleError) throws -> UInt8 {
        try take(1, orThrow: error())[0]
    }

    mutating func u16(orThrow error: @autoclosure () -> BundleError) throws -> UInt16 {
        UInt16(littleEndian: try take(2, orThrow: error()).loadUnaligned(as: UInt16.self))
    }

    mutating func u32(orThrow error: @autoclosure () -> BundleError) throws -> UInt32 {
        UInt32(littleEndian: try take(4, orThrow: error()).loadUnaligned(as: UInt32.self))
    }

    mutating func u64(orThrow error: @autoclosure () -> BundleError) throws -> UInt64 {
        UInt64(littleEndian: try take(8, orThrow: error()).loadUnaligned(as: UInt64.self))
    }
}

extension UnsafeRawBufferPointer {
    /// Little-endian load at a fixed offset the caller has bounds-checked.
    @inline(__always) func le16(at offset: Int) -> UInt16 { UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self)) }
    @inline(__always) func le32(at offset: Int) -> UInt32 { UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    @inline(__always) func le64(at offset: Int) -> UInt64 { UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
}

extension Array where Element == UInt8 {
    /// Appends `value` as little-endian bytes.
    mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// Stores a little-endian value at `offset` (which must be in bounds).
    mutating func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        Swift.withUnsafeBytes(of: value.littleEndian) { raw in
            for (i, b) in raw.enumerated() { self[offset + i] = b }
        }
    }
}
