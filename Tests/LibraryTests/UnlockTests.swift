import EncFS
import Foundation
import XCTest

/// Every kind of `EncryptedBundle.Unlock`, alone and several at once.
final class UnlockTests: XCTestCase {
    /// The 32 bytes a key file spells in hex.
    private func keyBytes(_ keyFile: String) throws -> [UInt8] {
        let hex = Array(try ScratchTree.readFile(bytes(keyFile)).filter { $0 > 0x20 })
        return try stride(from: 0, to: hex.count, by: 2).map { i in
            guard let byte = UInt8(String(decoding: hex[i..<(i + 2)], as: UTF8.self), radix: 16) else {
                throw TestFailure("key file is not hex")
            }
            return byte
        }
    }

    /// Fails unless `bundle` reads like the fixture's tree.
    private func assertReads(_ bundle: EncryptedBundle, _ fixture: LibraryFixture,
                             file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/a.pdf")), fixture.contents("docs/a.pdf"), file: file, line: line)
    }

    func testUnlock_KeyFile() throws {
        let fixture = try LibraryFixture.shared()
        try assertReads(try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.keyFile)), fixture)
    }

    func testUnlock_KeyBytesAndData() throws {
        let fixture = try LibraryFixture.shared()
        let key = try keyBytes(fixture.keyFile)
        XCTAssertEqual(key.count, 32)
        try assertReads(try EncryptedBundle(path: fixture.appBundle, unlock: .key(key)), fixture)
        try assertReads(try EncryptedBundle(path: fixture.appBundle, unlock: .key(Data(key))), fixture)
    }

    func testUnlock_Passphrase() throws {
        let fixture = try LibraryFixture.shared()
        try assertReads(try EncryptedBundle(path: fixture.multiBundle, unlock: .passphrase(fixture.passphrase)), fixture)
    }

    func testUnlock_PassphraseFile() throws {
        let fixture = try LibraryFixture.shared()
        try assertReads(try EncryptedBundle(path: fixture.multiBundle, unlock: .passphraseFile(fixture.passphraseFile)), fixture)
    }

    func testUnlock_IdentityFile() throws {
        let fixture = try LibraryFixture.shared()
        try assertReads(try EncryptedBundle(path: fixture.multiBundle, unlock: .identityFile(fixture.identityFile)), fixture)
    }

    func testUnlock_AnyOpensWithTheOneThatFits() throws {
        let fixture = try LibraryFixture.shared()
        let wrong = EncryptedBundle.Unlock.keyFile(fixture.otherKeyFile)
        try assertReads(try EncryptedBundle(path: fixture.multiBundle, unlock: .any([wrong, .identityFile(fixture.identityFile)])), fixture)
        try assertReads(try EncryptedBundle(path: fixture.appBundle, unlock: .any([wrong, .keyFile(fixture.keyFile)])), fixture)
        let memory = MemoryByteSource(bytes: try fixture.bundleBytes(fixture.multiBundle))
        try assertReads(try EncryptedBundle(source: memory, unlock: .any([wrong, .passphrase(fixture.passphrase)])), fixture)
        // Nested: any of any.
        try assertReads(try EncryptedBundle(path: fixture.appBundle, unlock: .any([.any([wrong]), .any([.keyFile(fixture.keyFile)])])), fixture)
    }

    func testUnlock_AnyOfNothingIsWrongKey() throws {
        let fixture = try LibraryFixture.shared()
        XCTAssertThrowsError(try EncryptedBundle(path: fixture.appBundle, unlock: .any([]))) { error in
            XCTAssertEqual(error as? EncryptedBundleError, .wrongKey(slotKinds: [.key]))
        }
    }
}
