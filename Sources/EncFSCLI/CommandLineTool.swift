#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// The entry point of every encfs executable: what each process does
/// before any argument is read.
package enum CommandLineTool {
    /// Hardens the process, runs `command` with the raw argv and exits with
    /// its status.
    ///
    /// Core dumps go off first, before a key file, passphrase or identity
    /// can be read: every tool may hold a secret (pack and inspect unlock
    /// bundles, keygen makes private keys, mount keeps the content key for
    /// its whole life).
    package static func main(_ command: ([[UInt8]]) -> Int32) -> Never {
        ProcessHardening.disableCoreDumps()
        exit(command(rawArguments()))
    }
}
