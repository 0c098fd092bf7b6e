import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Buffered raw-byte output to a descriptor owned elsewhere (standard
/// output by default), so listings of non-UTF-8 names come out exactly as
/// stored.
package final class OutputStream {
    private let output: FileDescriptor.Borrowed
    private var buffer: [UInt8] = []

    package init(_ output: FileDescriptor.Borrowed = .standardOutput) {
        self.output = output
        buffer.reserveCapacity(1 << 16)
    }

    deinit { flush() }

    package func write(_ text: String) { buffer += Array(text.utf8); flushIfFull() }
    package func write(_ bytes: [UInt8]) { buffer += bytes; flushIfFull() }
    package func write(_ bytes: UnsafeRawBufferPointer) { buffer += bytes; flushIfFull() }
    package func line(_ text: String) { write(text); buffer.append(0x0A); flushIfFull() }

    private func flushIfFull() { if buffer.count >= 1 << 16 { flush() } }

    /// Writes everything buffered; a closed pipe ends the process as usual (SIGPIPE).
    package func flush() {
        buffer.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count, let base = raw.baseAddress {
                let n = SystemCall.retryingInterrupts { Glibc.write(output.rawValue, base + done, raw.count - done) }
                if n <= 0 { break }
                done += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes `bytes` directly, bypassing the buffer (for streamed plaintext
    /// that should not linger in a growing array).
    package func writeDirect(_ bytes: UnsafeRawBufferPointer) throws {
        flush()
        try output.writeAll(bytes)
    }
}
