import Synchronization

/// Private keys made by the `openssl` command line, kept in memory so that
/// the slow ones (RSA) are generated once per test process, not per test.
///
/// Only the PEM text is kept; each test writes it into its own scratch
/// directory, which is removed afterwards.
public enum OpenSSLKeyCache {
    private static let keys = Mutex<[String: [UInt8]]>([:])

    /// The key cached under `name`, made by `generate` the first time.
    ///
    /// - Throws: what `generate` throws.
    public static func privateKey(_ name: String, generate: () throws -> [UInt8]) throws -> [UInt8] {
        if let cached = keys.withLock({ $0[name] }) { return cached }
        // Generated outside the lock: tests run one at a time, and a second
        // key made by a race would be just as good.
        let pem = try generate()
        keys.withLock { $0[name] = pem }
        return pem
    }
}
