import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// Bundles for the signature tests: one source tree, a host (an X25519
/// identity, whose public key anyone may have), the CI's signing key and a
/// stranger's, and helpers to pack, open and edit bundles in place.
struct SignedBundles {
    let tmp: TemporaryDirectory
    let source: [UInt8]
    /// multi.bin: 3 full 4 KiB chunks and a partial one.
    let files: [String: [UInt8]]
    let host: PrivateKey
    let ci: SigningKey
    let stranger: SigningKey

    init() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 0x5167)
        files = ["multi.bin": generator.bytes(3 * 4096 + 100), "small.txt": bytes("small\n"), "empty": []]
        for (name, data) in files { try FileTree.writeFile(join(source, bytes(name)), data) }
        host = try PrivateKey.generateX25519()
        ci = try SigningKey.generate()
        stranger = try SigningKey.generate()
    }

    /// Packs the tree to the host's public key (what anyone can do), signed
    /// by `signer` when given, with extra secrets' slots.
    func pack(_ name: String, signedBy signer: SigningKey?, keys: [KeyMaterial] = []) throws -> [UInt8] {
        let path = tmp.appending(name)
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.recipients = [host.publicKey]
        options.keys = keys
        options.scrypt = .testing
        options.signingKey = signer
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return path
    }

    /// Opens `path` as the host, requiring `origin`.
    func open(_ path: [UInt8], origin: OriginPolicy = OriginPolicy()) throws -> BundleReader {
        try BundleReader.open(path: path, materials: [.identity(host)], origin: origin)
    }

    /// A policy requiring a signature by one of `signers`.
    static func signed(by signers: SigningKey...) -> OriginPolicy {
        OriginPolicy(signers: signers.map(\.publicKey))
    }

    /// Overwrites `bytes` at `offset` of the file at `path`.
    static func overwrite(_ path: [UInt8], at offset: Int, with bytes: [UInt8]) throws {
        var contents = try FileTree.readFile(path)
        contents.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        try FileTree.writeFile(path, contents)
    }

    /// Replaces the header of the bundle at `path` by `header`, made and
    /// authenticated under `keys`, as a holder of the content key can
    /// (the payload stays; the header must keep its length or the payload
    /// moves with it, which `serialized` handles by writing it whole).
    static func rewriteHeader(_ path: [UInt8], _ header: BundleHeader, keys: BundleKeys) throws {
        let old = try FileTree.readFile(path)
        let oldLength = try old.withUnsafeBytes { try BundleHeader.headerLength(fromPrefix: $0) }
        try FileTree.writeFile(path, try header.serialized(keys: keys) + old[oldLength...])
    }
}

extension BundleReader {
    /// Opens with `origin` required and the other options at their defaults.
    static func open(path: [UInt8], materials: [KeyMaterial], origin: OriginPolicy) throws -> BundleReader {
        try open(path: path, materials: materials, options: OpenOptions(origin: origin))
    }

    /// Unlocks with `origin` required, as the mount command does.
    static func unlock(source: any ByteSource, materials: [KeyMaterial], origin: OriginPolicy) throws -> BundleKeys {
        try unlock(source: source, materials: materials, options: OpenOptions(origin: origin))
    }
}
