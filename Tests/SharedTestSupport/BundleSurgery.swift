import CryptCore
import EncFSCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Damages bundles on purpose, at places found through the EncFS library
/// (the same code the binaries use to read them).
package enum BundleSurgery {
    /// Where a bundle's parts are, from its (unauthenticated) header.
    package struct Layout {
        package let headerLength: UInt64
        package let indexStart: UInt64
        package let indexLength: UInt64
        package let bundleLength: UInt64
    }

    /// Reads the header of `bundle` without a key.
    package static func layout(of bundle: String) throws -> Layout {
        let (header, size) = try BundleReader.readHeader(path: Array(bundle.utf8))
        return Layout(headerLength: UInt64(header.headerLength),
                      indexStart: UInt64(header.headerLength) + header.indexOffset,
                      indexLength: header.indexLength, bundleLength: size)
    }

    /// Absolute bundle offset of byte `byte` of the sealed chunk `chunk`
    /// (ciphertext, then its 16-byte tag) of the file at `path`.
    ///
    /// - Parameters:
    ///   - path: the file's path inside the bundle, e.g. `dir/big`.
    ///   - keyFile: a key file that opens the bundle.
    package static func offset(ofChunk chunk: UInt64, byte: UInt64, ofFile path: String, in bundle: String,
                       keyFile: String) throws -> UInt64 {
        try offset(ofChunk: chunk, byte: byte, ofRawPath: Array(path.utf8), in: bundle, keyFile: keyFile)
    }

    /// ``offset(ofChunk:byte:ofFile:in:keyFile:)`` for a path given as bytes
    /// (names that are not UTF-8).
    package static func offset(ofChunk chunk: UInt64, byte: UInt64, ofRawPath path: [UInt8], in bundle: String,
                       keyFile: String) throws -> UInt64 {
        let materials: [KeyMaterial] = [.rawKey(try KeyFiles.readKeyFile(Array(keyFile.utf8)))]
        // Any bundle a test made, links leading outside it included.
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: materials,
                                           options: OpenOptions(allowsExternalSymlinks: true))
        let entry = try reader.index.resolve(path: path)
        let layout = reader.header.layout
        precondition(chunk < layout.chunkCount(forPlaintextSize: entry.fileSize), "internal error: no chunk \(chunk) in \(path)")
        return UInt64(reader.header.headerLength) + entry.payloadOffset + layout.ciphertextOffset(ofChunk: chunk) + byte
    }

    /// Where a key slot's body is: the slot kind (1 raw key, 2 passphrase,
    /// 3 X25519, 4 RSA) and the absolute offset and length of its body.
    package struct SlotBody {
        package let kind: UInt8
        package let offset: UInt64
        package let length: Int
    }

    /// The key slots of `bundle`, read without a key. Slots follow the
    /// 64-byte fixed header, each `kind (1) ‖ reserved (1) ‖ length (2) ‖ body`
    /// (docs/FORMAT.md, "Key slots").
    package static func slots(of bundle: String) throws -> [SlotBody] {
        let (header, _) = try BundleReader.readHeader(path: Array(bundle.utf8))
        var offset: UInt64 = 64
        return header.slots.map { slot in
            defer { offset += 4 + UInt64(slot.body.count) }
            return SlotBody(kind: slot.kindCode, offset: offset + 4, length: slot.body.count)
        }
    }

    /// XORs the byte at `offset` of `path` with `mask`.
    package static func flipByte(at offset: UInt64, in path: String, mask: UInt8 = 0x01) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw SubprocessError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw SubprocessError("pread \(path) at \(offset)") }
        byte ^= mask
        guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw SubprocessError("pwrite \(path) at \(offset)") }
    }

    /// Sets the length of `path` to `length`.
    package static func truncate(_ path: String, to length: UInt64) throws {
        guard Glibc.truncate(path, off_t(length)) == 0 else {
            throw SubprocessError("truncate \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The size of `path` in bytes.
    package static func size(of path: String) throws -> UInt64 {
        var st = stat()
        guard stat(path, &st) == 0 else { throw SubprocessError("stat \(path): \(String(cString: strerror(errno)))") }
        return UInt64(st.st_size)
    }
}

extension BundleSurgery {
    /// Gives the file at `duplicate` the file id of the file at `original`
    /// (same size), as only a writer holding the content key could: copies
    /// the original's sealed chunks over the duplicate's (a chunk's
    /// associated data holds the file id, not its offset), its id into the
    /// duplicate's index record, and seals the index again (docs/FORMAT.md:
    /// zero nonce, associated data bundle id ‖ chunk size log2 ‖ payload
    /// length ‖ index offset). Everything still authenticates.
    package static func shareFileID(of original: String, with duplicate: String, in bundle: String, keyFile: String) throws {
        let materials: [KeyMaterial] = [.rawKey(try KeyFiles.readKeyFile(Array(keyFile.utf8)))]
        // Any bundle a test made, links leading outside it included.
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: materials,
                                           options: OpenOptions(allowsExternalSymlinks: true))
        let a = try reader.index.resolve(path: Array(original.utf8))
        let b = try reader.index.resolve(path: Array(duplicate.utf8))
        guard a.kind == .file, b.kind == .file, a.fileSize == b.fileSize else { throw SubprocessError("two files of one size needed") }
        let header = reader.header
        guard var file = FileManager.default.contents(atPath: bundle).map({ Array($0) }) else { throw SubprocessError("read \(bundle)") }
        let length = Int(header.layout.ciphertextSize(forPlaintextSize: a.fileSize))
        let aStart = header.headerLength + Int(a.payloadOffset)
        let bStart = header.headerLength + Int(b.payloadOffset)
        file.replaceSubrange(bStart..<(bStart + length), with: file[aStart..<(aStart + length)])
        var aad = header.bundleID + [header.layout.chunkSizeLog2]
        withUnsafeBytes(of: header.payloadLength.littleEndian) { aad += $0 }
        withUnsafeBytes(of: header.indexOffset.littleEndian) { aad += $0 }
        let nonce = [UInt8](repeating: 0, count: 12)
        let indexStart = header.headerLength + Int(header.indexOffset)
        let plaintext = try file[indexStart...].withUnsafeBytes {
            try AESGCM().open(key: reader.keys.indexKey, nonce: nonce, aad: aad, sealed: $0)
        }
        var index = plaintext.withUnsafeBytes { Array($0) }
        // Index header 32 bytes, records of 64, the file id at 48.
        let idA = 32 + a.position * 64 + 48
        let idB = 32 + b.position * 64 + 48
        index.replaceSubrange(idB..<(idB + 16), with: index[idA..<(idA + 16)])
        let sealed = try AESGCM().seal(key: reader.keys.indexKey, nonce: nonce, aad: aad, plaintext: SecureBytes(copying: index))
        file.replaceSubrange(indexStart..., with: sealed)
        guard FileManager.default.createFile(atPath: bundle, contents: Data(file)) else { throw SubprocessError("write \(bundle)") }
    }
}
