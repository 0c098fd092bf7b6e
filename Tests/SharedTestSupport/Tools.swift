import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Where the binaries under test and the helper programs are.
public enum Tools {
    /// Directory holding the `encfs-*` executables: `$ENCFS_BIN_DIR`,
    /// else `.build/release`, else `.build/debug` of this package (found
    /// from this file's path).
    public static let binaryDirectory: String? = {
        if let dir = ProcessInfo.processInfo.environment["ENCFS_BIN_DIR"], !dir.isEmpty { return dir }
        let root = repositoryRoot
        for configuration in ["release", "debug"] {
            let dir = "\(root)/.build/\(configuration)"
            if access("\(dir)/encfs-pack", X_OK) == 0, access("\(dir)/encfs-mount", X_OK) == 0 { return dir }
        }
        return nil
    }()

    /// `encfs-pack`.
    public static func pack() throws -> String { try binary("encfs-pack") }
    /// `encfs-mount`.
    public static func mount() throws -> String { try binary("encfs-mount") }

    /// `$ENCFS_TEST_TRANSPORT` (`uring` or `classic`): the transport every
    /// `encfs-mount` the tests run uses, so that Scripts/test.sh runs the
    /// mount tests once per transport; nil leaves encfs-mount's default.
    public static let testTransport: String? = {
        guard let value = ProcessInfo.processInfo.environment["ENCFS_TEST_TRANSPORT"], !value.isEmpty else { return nil }
        return value
    }()

    /// `arguments` for `encfs-mount` with `--transport` from
    /// ``testTransport`` in front, unless they choose one themselves or
    /// ask for auto_unmount or mount a remote bundle (both served classic,
    /// and refused with uring).
    public static func withTestTransport(_ arguments: [String]) -> [String] {
        guard let transport = testTransport,
              !arguments.contains(where: { $0 == "--transport" || $0.contains("transport=") || $0.contains("auto_unmount")
                                          || $0.hasPrefix("http://") || $0.hasPrefix("https://") || $0.hasPrefix("s3://")
                                          || $0 == "--address-file" })
        else { return arguments }
        return ["--transport", transport] + arguments
    }
    /// `encfs-keygen`.
    public static func keygen() throws -> String { try binary("encfs-keygen") }
    /// `encfs-inspect`.
    public static func inspect() throws -> String { try binary("encfs-inspect") }
    /// `encfs-ctl`.
    public static func ctl() throws -> String { try binary("encfs-ctl") }
    /// `encfs-rekey` (`encfs-inspect rekey` as a command of its own).
    public static func rekey() throws -> String { try binary("encfs-rekey") }

    /// This package's root directory, for the scripts under `examples/`
    /// and `Scripts/`.
    public static var repositoryRoot: String { BuiltBinaries.repositoryRoot }

    /// - Throws: `XCTSkip` when the binary is missing or stale, after the
    ///   first test of the process that finds it so has failed with one
    ///   line saying what to run (see ``BuiltBinaries``).
    public static func binary(_ name: String) throws -> String {
        if let problem = BuiltBinaries.problem(with: name, in: binaryDirectory) {
            // Recorded, not thrown: a caller's `try?` cannot hide it.
            if BuiltBinaries.firstReport() { XCTFail(problem) }
            throw XCTSkip("binaries not usable, see the first failure")
        }
        return "\(binaryDirectory ?? "")/\(name)"
    }

    /// The system Python (starts faster than a pyenv shim), else `python3` in PATH.
    public static let python: String = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3"

    /// `fusermount3`.
    public static let fusermount = "fusermount3"
}
