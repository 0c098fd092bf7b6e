/// A bundle held in memory: resources compiled into an application, a
/// bundle received over a channel of the application's own, tests.
public final class MemoryByteSource: ByteSource {
    private let bytes: [UInt8]
    public let displayName: [UInt8]
    public var size: UInt64 { UInt64(bytes.count) }
    /// The bytes never change while this object lives: its address will do.
    public var identity: ByteSourceIdentity {
        withUnsafeBytes(of: UInt(bitPattern: ObjectIdentifier(self).hashValue)) { ByteSourceIdentity(bytes: Array($0)) }
    }

    /// - Parameters:
    ///   - bytes: the whole bundle.
    ///   - name: shown in messages.
    public init(bytes: [UInt8], name: String = "memory") {
        self.bytes = bytes
        displayName = Array(name.utf8)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        guard offset < UInt64(bytes.count), buffer.count > 0 else { return 0 }
        let start = Int(offset)
        let count = min(buffer.count, bytes.count - start)
        bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<(start + count)])) }
        return count
    }
}
