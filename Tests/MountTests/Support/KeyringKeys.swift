import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Keys in the real kernel keyring for a test, put there with the
/// `keyctl` tool (Debian keyutils) exactly as a user would, and unlinked
/// at teardown whatever happens in between.
///
/// Keys go to the user keyring (`@u`): every process of the same user
/// reaches it, whatever session keyring the test runner gave this process.
extension ToolTestCase {
    /// A key description no other test (or run) uses, with the
    /// `prefix:` that `logon` keys require.
    func uniqueKeyDescription(_ label: String) -> String {
        "encfs-test:\(label):\(UUID().uuidString)"
    }

    /// `keyctl padd TYPE DESCRIPTION KEYRING < payload`, unlinked from
    /// `keyring` at teardown.
    ///
    /// - Returns: the key's id, as `keyctl` printed it.
    /// - Throws: `SubprocessError` when `keyctl` fails.
    @discardableResult
    func addKeyringKey(_ description: String, payload: [UInt8], type: String = "user", keyring: String = "@u") throws -> String {
        let file = try scratch.write(uniqueName("keyring-payload"), payload, mode: 0o600)
        defer { unlink(file) }
        let result = try run("/bin/sh", ["-c", #"exec keyctl padd "$1" "$2" "$3" < "$4""#, "sh", type, description, keyring, file])
        return try keyID(from: result, keyring: keyring)
    }

    /// `keyctl newring DESCRIPTION @u`: a keyring (not a user key) with
    /// that description, unlinked at teardown.
    @discardableResult
    func addKeyringKeyring(_ description: String) throws -> String {
        try keyID(from: try run("keyctl", ["newring", description, "@u"]), keyring: "@u")
    }

    /// The id `keyctl` printed; registers the unlink first thing.
    private func keyID(from result: ProcessResult, keyring: String) throws -> String {
        let id = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !id.isEmpty, id.allSatisfy(\.isNumber) else { throw SubprocessError(result.summary) }
        addTeardownBlock { _ = try? Subprocess.run("keyctl", ["unlink", id, keyring], timeout: 15) }
        return id
    }

    /// Sets `id` to expire in one second and waits (at most 15 s) until
    /// the kernel reports it expired.
    func expireKeyringKey(_ id: String) throws {
        try check("keyctl", ["timeout", id, "1"])
        let expired = Deadline.poll(seconds: 15, interval: 0.1) {
            (try? Subprocess.run("keyctl", ["print", id], timeout: 15))?.errorOutput.contains("expired") ?? false
        }
        guard expired else { throw SubprocessError("key \(id) did not expire within 15 s") }
    }

    /// Whether a user key named `description` is reachable from this
    /// process's session or user keyring.
    func keyringHasUserKey(_ description: String) throws -> Bool {
        let inSession = try run("keyctl", ["search", "@s", "user", description])
        let inUser = try run("keyctl", ["search", "@u", "user", description])
        return inSession.status == 0 || inUser.status == 0
    }
}
