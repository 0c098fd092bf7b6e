extension Array where Element == UInt8 {
    /// Calls `body` with a NUL-terminated copy, for system calls on byte paths.
    public func withCPath<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try (self + [0]).withUnsafeBufferPointer { bytes in
            try bytes.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }
}
