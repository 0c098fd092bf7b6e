@testable import EncFSCLI
@testable import EncFSMountCLI
import SharedTestSupport
import XCTest

/// `-o name=value`: every long option of encfs-mount has an fstab spelling,
/// derived from the parser (so options added later get one too), mount(8)'s
/// own options are dropped, kernel options stay, secrets are refused.
final class MountOptionSpellingTests: XCTestCase {
    private func parse(_ arguments: [String]) throws -> ArgumentParser.Result {
        let parser = MountCommand.parser
        return try parser.expandingMountOptions(try parser.parse(arguments.map { Array($0.utf8) }))
    }

    private func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    func testEveryLongOption_HasAnUnderscoreSpelling() throws {
        // Derived from the parser's own list: a new option is covered
        // without an entry here.
        for option in MountCommand.parser.options {
            guard let long = option.names.first(where: { $0.hasPrefix("--") }),
                  !ArgumentParser.optionsWithoutMountSpelling.contains(long), !long.hasPrefix("--internal") else { continue }
            let spelled = String(long.dropFirst(2).map { $0 == "-" ? "_" : $0 })
            let part = option.takesValue ? "\(spelled)=/some/value" : spelled
            let args = try parse(["b", "m", "-o", "allow_other,\(part)"])
            XCTAssertTrue(args.has(option.names[0]), "-o \(part) did not become \(long)")
            if option.takesValue { XCTAssertEqual(text(args.value(option.names[0])), "/some/value", part) }
            XCTAssertEqual(args.values("-o").compactMap(text), ["allow_other"], part)
        }
    }

    func testAliases_KeyfilePassfileIdentity() throws {
        let args = try parse(["b", "m", "-o", "keyfile=/k1,passfile=/p,identity=/id", "-o", "keyfile=/k2"])
        XCTAssertEqual(args.values("--key-file").compactMap(text), ["/k1", "/k2"])
        XCTAssertEqual(text(args.value("--passphrase-file")), "/p")
        XCTAssertEqual(text(args.value("--identity")), "/id")
        XCTAssertEqual(args.values("-o"), [])
    }

    func testMountOwnOptions_AreDroppedKernelOptionsKept() throws {
        let args = try parse(["b", "m", "-o", "rw,dev,suid,exec,nodev,nosuid,noexec,ro,_netdev,nofail,noauto,x-systemd.automount,comment=a b,allow_other,default_permissions"])
        XCTAssertEqual(args.values("-o").compactMap(text), ["nodev,nosuid,noexec,ro,allow_other,default_permissions"])
        let configuration = try MountCommand.configuration(from: args)
        XCTAssertFalse(configuration.fuseOptions.contains("rw"))
        XCTAssertTrue(configuration.fuseOptions.contains("noexec"))
    }

    func testSecrets_AreRefusedWithoutEchoingThem() {
        for part in ["passphrase=hunter2", "key=00112233", "password=hunter2"] {
            XCTAssertThrowsError(try parse(["b", "m", "-o", "ro,\(part)"]), part) { error in
                guard let usage = error as? UsageError else { return XCTFail("\(error)") }
                XCTAssertTrue(usage.message.contains("refused"), usage.message)
                XCTAssertFalse(usage.message.contains("hunter2") || usage.message.contains("00112233"), usage.message)
            }
        }
    }

    func testWrongShapes_AreUsageErrors() {
        for part in ["keyfile", "keyfile=", "index_cache", "log_names=yes", "foreground=1"] {
            XCTAssertThrowsError(try parse(["b", "m", "-o", part]), part) { XCTAssertTrue($0 is UsageError, part) }
        }
        // help, version and the daemon's marker have no -o spelling: left to libfuse.
        for part in ["help", "version", "internal_daemon_child"] {
            XCTAssertEqual(try parse(["b", "m", "-o", part]).values("-o").compactMap(text), [part])
        }
    }
}
