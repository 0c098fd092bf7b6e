import CryptCore
@testable import EncFSCore
import Foundation
import SharedTestSupport

/// badsig.bundle for the fixture: app.bundle whose index a holder of the
/// content key has sealed again with one byte changed (the root's mtime).
/// The GCM tag and the header hold; only the signature over the index's
/// hash notices, so it opens without verifying keys and fails with
/// ENCFS_ERR_BAD_SIGNATURE with sign.key.pub. make_fixture.py cannot make
/// it: it needs the index key (SignatureMountTests does the same surgery).
enum BadSignatureBundle {
    static func make(from bundle: String, keyFile: String, to output: String) throws {
        let key = try KeyFiles.readKeyFile(Array(keyFile.utf8))
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: [.rawKey(key)],
                                           options: OpenOptions(allowsExternalSymlinks: true))
        let header = reader.header
        let start = header.headerLength + Int(header.indexOffset)
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: bundle)))
        let gcm = try AESGCM()
        var plaintext = try file[start..<(start + Int(header.indexLength))].withUnsafeBytes {
            try gcm.open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header), sealed: $0)
        }.withUnsafeBytes { Array($0) }
        plaintext[BundleIndex.headerSize + 16] ^= 0x01 // the root's mtime
        let resealed = try gcm.seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header),
                                    plaintext: SecureBytes(copying: plaintext))
        file.replaceSubrange(start..<(start + resealed.count), with: resealed)
        try Data(file).write(to: URL(fileURLWithPath: output))
    }
}
