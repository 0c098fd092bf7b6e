extension Array where Element == UInt8 {
    /// Calls `body` with a NUL-terminated copy of the bytes (paths are byte
    /// strings; they never pass through `String`).
    package func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        var copy = self
        copy.append(0)
        return try copy.withUnsafeBufferPointer { b in
            try b.withMemoryRebound(to: CChar.self) { c in
                guard let base = c.baseAddress else { preconditionFailure("internal error: empty C string buffer") }
                return try body(base)
            }
        }
    }
}
