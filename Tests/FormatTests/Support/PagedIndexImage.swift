import CryptCore
@testable import EncFSCore
import XCTest

/// A paged index opened page by page with the content key, for edits only
/// a key holder can make: change any page's plaintext (or page 0's
/// fields), then write the bundle back with every page sealed again,
/// stored uncompressed, page 0's table and the header (lengths) made to
/// match. Options write deliberately wrong seals: pages swapped, sealed for
/// another page count, or a page's sealed bytes taken from elsewhere.
struct PagedIndexImage {
    /// Page 0's plaintext.
    var head: [UInt8]
    /// Pages 1 … N−1, plaintext.
    var pages: [[UInt8]]
    let header: BundleHeader
    let keys: BundleKeys
    /// Header and chunk data, as they were.
    private let prefix: [UInt8]

    init(_ path: [UInt8], reader: BundleReader) throws {
        let header = reader.header
        let keys = reader.keys
        self.header = header
        self.keys = keys
        let file = try FileTree.readFile(path)
        let start = header.headerLength + Int(header.indexOffset)
        prefix = Array(file[..<start])
        let headLength = Int(header.features.pagedIndexHeadLength)
        XCTAssertGreaterThan(headLength, 0, "not a paged index")
        let base = IndexBuilder.associatedData(header)
        let gcm = try AESGCM()
        var head = [UInt8](repeating: 0, count: headLength - 16)
        try file[start..<(start + headLength)].withUnsafeBytes { sealed in
            try head.withUnsafeMutableBytes {
                try IndexPageSeal.open(sealed, page: 0, aad: IndexPageSeal.associatedData(base: base, page: 0, pageCount: nil),
                                       key: keys.indexKey, gcm: gcm, into: $0)
            }
        }
        let directory = try head.withUnsafeBytes { try IndexDirectory($0, remainingLength: header.indexLength - UInt64(headLength)) }
        let decompressor = try ChunkDecompressor()
        var pages: [[UInt8]] = []
        for k in 1..<directory.pageCount {
            let at = start + headLength + Int(directory.pageOffsets[k - 1])
            let sealed = Array(file[at..<(at + Int(directory.sealedLengths[k - 1]))])
            var stored = [UInt8](repeating: 0, count: sealed.count - 16)
            try sealed.withUnsafeBytes { s in
                try stored.withUnsafeMutableBytes {
                    try IndexPageSeal.open(s, page: k, aad: IndexPageSeal.associatedData(base: base, page: k, pageCount: directory.pageCount),
                                           key: keys.indexKey, gcm: gcm, into: $0)
                }
            }
            let length = Int(directory.plainLengths[k - 1])
            if stored.count == length {
                pages.append(stored)
            } else {
                var plain = [UInt8](repeating: 0, count: length)
                let ok = stored.withUnsafeBytes { s in plain.withUnsafeMutableBytes { decompressor.decompress(s, into: $0) } }
                XCTAssertTrue(ok, "page \(k) inflates")
                pages.append(plain)
            }
        }
        self.head = head
        self.pages = pages
    }

    /// The page count page 0 records.
    var pageCount: Int { Int(head[8]) | Int(head[9]) << 8 | Int(head[10]) << 16 | Int(head[11]) << 24 }

    /// The sealed bytes of page `k` as the bundle at `path` stores them.
    static func sealedPage(_ k: Int, of path: [UInt8], reader: BundleReader) throws -> [UInt8] {
        let header = reader.header
        let file = try FileTree.readFile(path)
        let start = header.headerLength + Int(header.indexOffset)
        let headLength = Int(header.features.pagedIndexHeadLength)
        guard case .paged(let store) = reader.index.storage else { throw BundleError.corruptIndex("not paged") }
        let at = start + headLength + Int(store.directory.pageOffsets[k - 1])
        return Array(file[at..<(at + Int(store.directory.sealedLengths[k - 1]))])
    }

    /// Writes the bundle back to `path`.
    ///
    /// - Parameters:
    ///   - sealedForPageCount: seal pages 1 … N−1 as if the index had this many pages.
    ///   - swapping: store these two pages (sealed bytes and lengths) in each other's places.
    ///   - replacing: store these sealed bytes in place of a page's.
    ///   - storedPages: store these bytes (e.g. a zstd frame) as a page's
    ///     stored form, in place of its plaintext.
    func write(_ path: [UInt8], sealedForPageCount: Int? = nil, swapping: (Int, Int)? = nil, replacing: [Int: [UInt8]] = [:],
               storedPages: [Int: [UInt8]] = [:]) throws {
        let stored = pages.indices.map { storedPages[$0 + 1] ?? pages[$0] }
        var sealedLengths = stored.map { $0.count + 16 }
        for (k, bytes) in replacing { sealedLengths[k - 1] = bytes.count }
        var plainLengths = pages.map(\.count)
        if let (a, b) = swapping {
            sealedLengths.swapAt(a - 1, b - 1)
            plainLengths.swapAt(a - 1, b - 1)
        }
        var head = self.head
        for k in 1...pages.count {
            let at = IndexDirectory.fixedSize + (k - 1) * IndexDirectory.bytesPerPage
            head.storeLE(UInt32(sealedLengths[k - 1]), at: at)
            head.storeLE(UInt32(plainLengths[k - 1]), at: at + 4)
        }
        let indexLength = UInt64(head.count + 16 + sealedLengths.reduce(0, +))
        let newHeader = BundleHeader(bundleID: header.bundleID, layout: header.layout, slots: header.slots,
                                     payloadLength: header.indexOffset + indexLength, indexOffset: header.indexOffset,
                                     indexLength: indexLength, features: header.features.withPagedIndex(headLength: UInt32(head.count + 16)))
        let base = IndexBuilder.associatedData(newHeader)
        let gcm = try AESGCM()
        var region: [UInt8] = []
        try head.withUnsafeBytes {
            try IndexPageSeal.seal($0, page: 0, aad: IndexPageSeal.associatedData(base: base, page: 0, pageCount: nil),
                                   key: keys.indexKey, gcm: gcm, appendingTo: &region)
        }
        var sealedPages: [[UInt8]] = []
        for k in 1...pages.count {
            if let bytes = replacing[k] {
                sealedPages.append(bytes)
                continue
            }
            var out: [UInt8] = []
            let aad = IndexPageSeal.associatedData(base: base, page: k, pageCount: sealedForPageCount ?? pageCount)
            try stored[k - 1].withUnsafeBytes { try IndexPageSeal.seal($0, page: k, aad: aad, key: keys.indexKey, gcm: gcm, appendingTo: &out) }
            sealedPages.append(out)
        }
        if let (a, b) = swapping { sealedPages.swapAt(a - 1, b - 1) }
        for page in sealedPages { region += page }
        let headerBytes = try newHeader.serialized(keys: keys)
        XCTAssertEqual(headerBytes.count, header.headerLength)
        try FileTree.writeFile(path, headerBytes + prefix[header.headerLength...] + region)
    }

    /// Offset of record `i` (counted from the page's first) in a record page.
    static func record(_ i: Int) -> Int { RecordPage.headerSize + i * IndexEntry.recordSize }

    /// Offset of the strings in record page `page` (1-based) of this image.
    func strings(ofPage page: Int) -> Int {
        let p = pages[page - 1]
        let m = Int(p[4]) | Int(p[5]) << 8 | Int(p[6]) << 16 | Int(p[7]) << 24
        return RecordPage.headerSize + m * IndexEntry.recordSize
    }
}
