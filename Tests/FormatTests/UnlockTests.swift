import CryptCore
@testable import EncFSCore
import SharedTestSupport
import XCTest

/// Key slots: every slot opens the same bundle, wrong secrets are refused
/// with `wrongKey`, and the scrypt cost is what the slot says.
final class UnlockTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private var bundle: [UInt8] = []
    private let key = TestSecrets.key(1)
    private let passphrase = TestSecrets.passphrase("correct horse battery staple")
    private let contents = bytes("slot test\n")

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        try FileTree.writeFile(join(source, bytes("a.txt")), contents)
        bundle = tmp.appending("two-slots.bundle")
        try packBundle(source: source, destination: bundle, keys: [.rawKey(key), .passphrase(passphrase)])
    }

    override func tearDown() { tmp = nil }

    func testOpen_RawKeyAndPassphraseSlots_EitherOpens() throws {
        let byKey = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        let byPassphrase = try BundleReader.open(path: bundle, materials: [.passphrase(passphrase)])
        XCTAssertEqual(byKey.header.slots.map(\.kindName), ["raw-key", "passphrase"])
        XCTAssertEqual(byKey.header.slots[1].scryptParameters, Scrypt.Parameters.testing)
        XCTAssertTrue(byKey.keys.contentKey == byPassphrase.keys.contentKey, "both slots wrap the same content key")
        XCTAssertEqual(try byKey.contents(of: bytes("a.txt")), contents)
        XCTAssertEqual(try byPassphrase.contents(of: bytes("a.txt")), contents)
    }

    /// A passphrase slot with the given cost and random salt and wrap (it
    /// never opens; only its parameters matter here).
    private func passphraseSlot(logN: UInt8, r: UInt32, p: UInt32) throws -> KeySlot {
        var body: [UInt8] = [logN, 0, 0, 0]
        body.appendLE(r)
        body.appendLE(p)
        body += try SecureRandom.bytes(KeySlot.saltSize + KeySlot.wrappedSize)
        return KeySlot(kindCode: KeySlot.Kind.passphrase.rawValue, body: body)
    }

    /// Five slots at the per-slot limit (2^24 work each, about 6 s here)
    /// exceed the total a reader spends per passphrase: refused before any
    /// scrypt run, while a raw key is still only matched by id.
    func testUnlock_PassphraseSlotsOverTotalWork_RefusedBeforeScrypt() throws {
        let slots = try (0..<5).map { _ in try passphraseSlot(logN: 21, r: 8, p: 1) }
        let header = BundleHeader(bundleID: try SecureRandom.bytes(BundleFormat.idSize), layout: ChunkLayout(chunkSizeLog2: 13),
                                  slots: slots, payloadLength: 0, indexOffset: 0, indexLength: 0)
        XCTAssertThrowsError(try header.unlock(with: [.passphrase(passphrase)])) { error in
            guard case BundleError.limitExceeded(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.contains("5 passphrase slots need scrypt work 83886080"), why)
        }
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["passphrase"])) { _ = try header.unlock(with: [.rawKey(self.key)]) }
    }

    func testTotalScryptWork_LimitIsInclusive() throws {
        XCTAssertNoThrow(try KeySlot.checkTotalScryptWork(Array(repeating: KeySlot.maximumScryptWork, count: 4)))
        XCTAssertNoThrow(try KeySlot.checkTotalScryptWork(Array(repeating: 1 << 20, count: 64)))
        XCTAssertThrowsError(try KeySlot.checkTotalScryptWork(Array(repeating: KeySlot.maximumScryptWork, count: 4) + [1]))
        // Slot work saturates just over the per-slot limit, whatever the fields say.
        XCTAssertEqual(KeySlot.work(of: Scrypt.Parameters(logN: 200, r: 8, p: 1)), KeySlot.maximumScryptWork + 1)
        XCTAssertEqual(KeySlot.work(of: Scrypt.Parameters(logN: 30, r: .max, p: .max)), KeySlot.maximumScryptWork + 1)
        XCTAssertEqual(KeySlot.work(of: Scrypt.Parameters.default), 1 << 20)
    }

    func testOpen_WrongKeyFails() {
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["raw-key", "passphrase"])) {
            try BundleReader.open(path: bundle, materials: [.rawKey(TestSecrets.key(2))])
        }
    }

    func testOpen_WrongPassphraseFails() {
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["raw-key", "passphrase"])) {
            try BundleReader.open(path: bundle, materials: [.passphrase(TestSecrets.passphrase("correct horse battery stapler"))])
        }
    }

    func testOpen_NoSecretsFails() {
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["raw-key", "passphrase"])) {
            try BundleReader.open(path: bundle, materials: [])
        }
    }

    /// Every secret given is tried: a wrong one does not stop a right one.
    func testOpen_WrongKeyThenRightPassphrase_Opens() throws {
        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(TestSecrets.key(3)), .passphrase(passphrase)])
        XCTAssertEqual(try reader.contents(of: bytes("a.txt")), contents)
    }

    /// The mount daemon reopens with the content key alone.
    func testOpen_ContentKey_Opens() throws {
        let first = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        let second = try BundleReader.open(path: bundle, contentKey: first.keys.contentKey)
        XCTAssertEqual(try second.contents(of: bytes("a.txt")), contents)
    }

    func testOpen_WrongContentKey_FailsAuthentication() {
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) {
            try BundleReader.open(path: bundle, contentKey: TestSecrets.key(1))
        }
    }

    /// The raw key's slot is found by key id, which is the documented
    /// derivation: the first 8 bytes of HKDF(key, no salt, "encfs v1 key id").
    func testRawKeySlot_KeyIDIsHKDFOfTheKey() throws {
        let header = try BundleReader.readHeader(path: bundle).header
        let info = bytes("encfs v1 key id")
        let expected = try key.withUnsafeBytes { k in
            try info.withUnsafeBytes { i in
                try HKDF.deriveKey(inputKey: k, salt: UnsafeRawBufferPointer(start: nil, count: 0), info: i, outputCount: 8)
            }
        }
        XCTAssertEqual(header.slots[0].keyID, expected.withUnsafeBytes { Array($0) })
        XCTAssertNil(header.slots[1].keyID)
    }

    /// Passphrase slots use scrypt N = 2^17, r = 8, p = 1 unless told
    /// otherwise. (The only test that pays for the default cost.)
    func testPack_DefaultScryptCost_IsLogN17() throws {
        XCTAssertEqual(PackOptions().scrypt, Scrypt.Parameters(logN: 17, r: 8, p: 1))
        let source = tmp.appending("source")
        let defaultBundle = tmp.appending("default-cost.bundle")
        var options = PackOptions()
        options.keys = [.passphrase(passphrase)]
        _ = try BundleWriter.pack(source: source, destination: defaultBundle, options: options) { _, _ in }
        let header = try BundleReader.readHeader(path: defaultBundle).header
        XCTAssertEqual(header.slots.count, 1)
        XCTAssertEqual(header.slots[0].scryptParameters, Scrypt.Parameters(logN: 17, r: 8, p: 1))
        let reader = try BundleReader.open(path: defaultBundle, materials: [.passphrase(passphrase)])
        XCTAssertEqual(try reader.contents(of: bytes("a.txt")), contents)
    }

    // MARK: - scrypt memory (security review, finding 6)

    /// setUp's bundle: a raw-key slot, then a passphrase slot at the test
    /// cost (N = 2^14, r = 8: 16 MiB). Under an 8 MiB limit the slot is not
    /// tried and the error names it; the limit is inclusive; raw keys run
    /// no scrypt, so no limit applies to them.
    func testOpen_PassphraseSlotOverMemoryLimit_RefusedNamingTheSlot() throws {
        let error = XCTAssertThrowsBundleError(.scryptMemoryLimit(slot: 2, needs: 16 << 20, limit: 8 << 20)) {
            try BundleReader.open(path: bundle, materials: [.passphrase(passphrase)], options: OpenOptions(scryptMemoryLimit: 8 << 20))
        }
        XCTAssertEqual(error?.message, "key slot 2 (passphrase) needs 16 MiB of scrypt memory, more than the 8 MiB allowed")
        XCTAssertNoThrow(try BundleReader.open(path: bundle, materials: [.passphrase(passphrase)],
                                               options: OpenOptions(scryptMemoryLimit: 16 << 20)))
        XCTAssertNoThrow(try BundleReader.open(path: bundle, materials: [.rawKey(key)], options: OpenOptions(scryptMemoryLimit: 1 << 20)))
    }

    /// 1 GiB by default: exactly the costliest slot encfs-pack writes.
    func testDefaultScryptMemoryLimit_AdmitsTheCostliestSlotPackMakes() {
        XCTAssertEqual(OpenOptions().scryptMemoryLimit, 1 << 30)
        XCTAssertEqual(KeySlot.scryptMemory(of: Scrypt.Parameters(logN: 20, r: 8, p: 1)), OpenOptions.defaultScryptMemoryLimit)
        XCTAssertEqual(KeySlot.scryptMemory(of: .default), 128 << 20)
        XCTAssertEqual(KeySlot.scryptMemory(of: Scrypt.Parameters(logN: 200, r: 8, p: 1)), .max)
        XCTAssertEqual(KeySlot.scryptMemory(of: Scrypt.Parameters(logN: 56, r: .max, p: 1)), .max)
    }

    /// N = 2^20, r = 9 needs 1.125 GiB: within the format's 2 GiB and work
    /// limits, so any open with a passphrase used to run it (a hostile
    /// header needs no key to ask). Refused by default, before scrypt.
    func testUnlock_SlotOverDefaultMemoryLimit_RefusedBeforeScrypt() throws {
        let header = BundleHeader(bundleID: try SecureRandom.bytes(BundleFormat.idSize), layout: ChunkLayout(chunkSizeLog2: 13),
                                  slots: [try passphraseSlot(logN: 20, r: 9, p: 1)], payloadLength: 0, indexOffset: 0, indexLength: 0)
        XCTAssertThrowsBundleError(.scryptMemoryLimit(slot: 1, needs: 9 << 27, limit: 1 << 30)) {
            _ = try header.unlock(with: [.passphrase(passphrase)])
        }
    }

    /// A slot over the limit is passed over, not fatal: another passphrase
    /// slot still opens; only when none opens is the skipped one named.
    func testOpen_OneSlotOverLimit_OtherSlotStillOpens() throws {
        let other = TestSecrets.passphrase("a costlier passphrase slot")
        var changes = BundleRekeyer.Changes()
        changes.addKeys = [.passphrase(other)]
        changes.scrypt = Scrypt.Parameters(logN: 14, r: 16, p: 1) // 32 MiB
        _ = try BundleRekeyer.rekey(path: bundle, reader: try BundleReader.open(path: bundle, materials: [.rawKey(key)]), changes: changes)
        let limit = OpenOptions(scryptMemoryLimit: 16 << 20)
        XCTAssertNoThrow(try BundleReader.open(path: bundle, materials: [.passphrase(passphrase)], options: limit))
        XCTAssertThrowsBundleError(.scryptMemoryLimit(slot: 3, needs: 32 << 20, limit: 16 << 20)) {
            try BundleReader.open(path: bundle, materials: [.passphrase(other)], options: limit)
        }
        XCTAssertNoThrow(try BundleReader.open(path: bundle, materials: [.passphrase(other)],
                                               options: OpenOptions(scryptMemoryLimit: 32 << 20)))
    }

    /// Writers keep what they allow, but warn when passphrase slots need
    /// more than readers take by default; the warning comes before anything
    /// is read (here the source does not even exist) or derived.
    func testPack_ScryptOverReaderDefault_Warns() throws {
        func warnings(_ scrypt: Scrypt.Parameters) -> [String] {
            var options = PackOptions()
            options.keys = [.passphrase(passphrase)]
            options.scrypt = scrypt
            var messages: [String] = []
            XCTAssertThrowsBundleError(.sourceUnreadable(errno: ENOENT)) {
                try BundleWriter.pack(source: tmp.appending("missing"), destination: tmp.appending("out.bundle"),
                                      options: options) { message, _ in messages.append(message) }
            }
            return messages
        }
        XCTAssertEqual(warnings(Scrypt.Parameters(logN: 20, r: 9, p: 1)),
                       ["passphrase slots need 1152 MiB of scrypt memory, more than readers allow by default (1 GiB): "
                        + "opening with the passphrase needs a higher limit"])
        XCTAssertEqual(warnings(Scrypt.Parameters(logN: 20, r: 8, p: 1)), [])
    }
}
