#if canImport(Glibc)
import Glibc
#endif

extension SecureMemoryStatus {
    /// Where OpenSSL's secure heap lies: the readable mapping that holds its
    /// blocks, or nil when there is no secure heap.
    ///
    /// For leak checkers only. LeakSanitizer scans the ordinary heap, stacks
    /// and globals for pointers, not this mapping, which OpenSSL makes
    /// itself; objects reachable only from secrets kept there (the state of
    /// OpenSSL's random generators, which it puts in the secure heap once
    /// one exists) would be reported as leaked. The fuzz harness registers
    /// this range as a root region so they are not.
    package static var secureHeapRegion: UnsafeRawBufferPointer? {
        SecureHeap.prepare()
        guard let probe = SecureHeap.allocate(1) else { return nil }
        defer { SecureHeap.free(probe.buffer) }
        guard let address = probe.buffer.baseAddress.map({ UInt(bitPattern: $0) }),
              let file = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard let range = text.split(separator: " ").first?.split(separator: "-"), range.count == 2,
                  let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                  start <= address, address < end else { continue }
            return UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: start), count: Int(end - start))
        }
        return nil
    }
}
