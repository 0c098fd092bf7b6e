import CUring
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Whether FUSE over io_uring can serve a mount here, found out before
/// mounting so that `--transport uring` fails with a reason instead of a
/// mount that never answers.
///
/// Three conditions: the kernel has the transport (its `fuse` module has
/// the `enable_uring` parameter, Linux 6.14+ with `CONFIG_FUSE_IO_URING`),
/// the parameter is on (root turns it on and says so in the log; it is
/// off by default), and this process may create an io_uring with 128-byte
/// submissions (`kernel.io_uring_disabled`, seccomp filters).
enum UringAvailability {
    /// The module parameter that lets FUSE connections use io_uring.
    static let parameterPath = "/sys/module/fuse/parameters/enable_uring"

    /// The verdict: available (and what was done to make it so), or why not.
    enum Verdict: Equatable {
        /// Ready; `enabledParameter` when this call switched it on.
        case available(enabledParameter: Bool)
        /// Not here, with a lowercase reason for the log or the error.
        case unavailable(String)
    }

    /// Checks the three conditions, switching the parameter on when it is
    /// off and the process may write it (root).
    static func probe() -> Verdict {
        guard let value = readParameter() else {
            return .unavailable("the kernel has no FUSE over io_uring (\(parameterPath) missing: needs Linux 6.14+ with CONFIG_FUSE_IO_URING)")
        }
        var enabled = false
        if value != "Y" {
            guard geteuid() == 0 else {
                return .unavailable("\(parameterPath) is off and only root may turn it on")
            }
            guard writeParameter("Y"), readParameter() == "Y" else {
                return .unavailable("cannot turn on \(parameterPath): \(String(cString: strerror(errno)))")
            }
            enabled = true
        }
        var ring = curing_ring()
        var rc = curing_ring_open(&ring, 2)
        if rc == 0 {
            rc = curing_ring_enable(&ring)
            curing_ring_close(&ring)
        }
        guard rc == 0 else {
            return .unavailable("io_uring refused: \(String(cString: strerror(-rc)))")
        }
        return .available(enabledParameter: enabled)
    }

    /// The parameter's value ("Y" or "N"), nil when it does not exist.
    static func readParameter() -> String? {
        guard let file = try? FileDescriptor.open(Array(parameterPath.utf8), flags: O_RDONLY) else { return nil }
        var byte: UInt8 = 0
        guard (try? withUnsafeMutableBytes(of: &byte) { try file.read(into: $0) }) == 1 else { return nil }
        return String(UnicodeScalar(byte))
    }

    /// Writes "Y" or "N" to the parameter; false on failure.
    @discardableResult
    static func writeParameter(_ value: String) -> Bool {
        guard let file = try? FileDescriptor.open(Array(parameterPath.utf8), flags: O_WRONLY) else { return false }
        let text = Array("\(value)\n".utf8)
        return (try? text.withUnsafeBytes { try file.writeAll($0) }) != nil
    }
}
