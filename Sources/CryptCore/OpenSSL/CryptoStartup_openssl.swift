internal import COpenSSL

/// OpenSSL's first-use setup, done ahead of need.
///
/// The first cipher fetch in a process builds OpenSSL's provider and
/// algorithm tables (and reads openssl.cnf); the first random bytes seed
/// its generator; the first small secret maps and locks the secure heap.
/// Each happens once per process, whenever it is first needed. A process
/// that has time to spare before its first secret arrives (the mount
/// daemon, while the command unlocks the header) calls this then, so that
/// none of it waits on the secret's path. It holds and makes no secret.
package enum CryptoStartup {
    /// Fetches the ciphers and digest the read path uses, seeds the random
    /// generator and makes the secure heap. Idempotent and thread-safe
    /// (each part is a Swift `static let` or OpenSSL's own once).
    package static func prepare() {
        SecureHeap.prepare()
        _ = Ciphers.aes256gcm
        _ = Digests.sha256
        var seed: UInt8 = 0
        _ = RAND_bytes(&seed, 1)
    }
}
