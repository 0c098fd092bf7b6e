import EncFSCore
import SharedTestSupport

/// Every byte of a bundle, named: the fixed header fields, each key slot's
/// fields, the header MAC, each file's chunk bodies and tags, and the sealed
/// index (docs/FORMAT.md). Built through the EncFS library from a pristine
/// bundle, so the tamper matrix knows what damage at any offset must do.
struct BundleRegions {
    /// What a region holds.
    enum Part: Hashable, Sendable {
        /// A field of the 64-byte fixed header.
        case fixedHeader(field: String)
        /// A field of a key slot (`kind` as `encfs-inspect` names it).
        case slot(kind: String, field: String)
        /// The HMAC-SHA256 that closes the header.
        case headerMAC
        /// The ciphertext of one chunk of the file at `path`.
        case chunkBody(path: String, chunk: UInt64)
        /// The 16-byte GCM tag of one chunk.
        case chunkTag(path: String, chunk: UInt64)
        /// The sealed index with its tag.
        case index

        /// A flipped byte here must make every open fail (only chunk damage
        /// lets a bundle open).
        var refusesOpen: Bool {
            switch self {
            case .chunkBody, .chunkTag: return false
            default: return true
            }
        }

        /// Coarse group for sampling and reporting, e.g. `passphrase slot`.
        var category: String {
            switch self {
            case .fixedHeader: return "fixed header"
            case .slot(let kind, _): return "\(kind) slot"
            case .headerMAC: return "header MAC"
            case .chunkBody: return "chunk body"
            case .chunkTag: return "chunk tag"
            case .index: return "index"
            }
        }

        var description: String {
            switch self {
            case .fixedHeader(let field): return "header \(field)"
            case .slot(let kind, let field): return "\(kind) slot \(field)"
            case .headerMAC: return "header MAC"
            case .chunkBody(let path, let chunk): return "\(path) chunk \(chunk) body"
            case .chunkTag(let path, let chunk): return "\(path) chunk \(chunk) tag"
            case .index: return "index"
            }
        }
    }

    /// One named byte range.
    struct Region: Sendable {
        let part: Part
        let range: Range<UInt64>
    }

    /// Sorted by offset; together they cover every byte exactly once.
    let regions: [Region]
    /// Header length H.
    let headerLength: UInt64
    /// Bundle length.
    let size: UInt64
    /// Chunk size in bytes.
    let chunkSize: UInt64

    /// Fixed header fields (offset, length, name) from docs/FORMAT.md.
    static let fixedFields: [(Int, Int, String)] = [
        (0, 8, "magic"), (8, 2, "version"), (10, 2, "flags"), (12, 4, "header length"), (16, 16, "bundle id"),
        (32, 1, "chunk size log2"), (33, 1, "slot count"), (34, 6, "reserved"), (40, 8, "payload length"),
        (48, 8, "index offset"), (56, 8, "index length"),
    ]

    /// Body fields of each slot kind (offset, length, name).
    static let slotFields: [String: [(Int, Int, String)]] = [
        "raw-key": [(0, 8, "key id"), (8, 16, "salt"), (24, 32, "wrapped key"), (56, 16, "wrap tag")],
        "passphrase": [(0, 1, "log2 N"), (1, 3, "body reserved"), (4, 4, "r"), (8, 4, "p"), (12, 16, "salt"),
                       (28, 32, "wrapped key"), (60, 16, "wrap tag")],
        "x25519": [(0, 8, "fingerprint"), (8, 32, "ephemeral key"), (40, 32, "wrapped key"), (72, 16, "wrap tag")],
    ]

    /// Maps the bundle at `bundle`, which `materials` must open.
    ///
    /// - Throws: `BundleError` from opening, `SubprocessError` when the map
    ///   does not tile the file (a test bug).
    init(bundle: String, materials: [KeyMaterial]) throws {
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: materials)
        let header = reader.header
        let h = UInt64(header.headerLength)
        var regions: [Region] = Self.fixedFields.map {
            Region(part: .fixedHeader(field: $0.2), range: UInt64($0.0)..<UInt64($0.0 + $0.1))
        }
        var offset = UInt64(64)
        for slot in header.slots {
            let kind = slot.kindName
            regions.append(Region(part: .slot(kind: kind, field: "kind"), range: offset..<(offset + 1)))
            regions.append(Region(part: .slot(kind: kind, field: "reserved"), range: (offset + 1)..<(offset + 2)))
            regions.append(Region(part: .slot(kind: kind, field: "body length"), range: (offset + 2)..<(offset + 4)))
            let body = offset + 4
            for (start, length, name) in Self.slotFields[kind] ?? [(0, slot.body.count, "body")] {
                regions.append(Region(part: .slot(kind: kind, field: name),
                                      range: (body + UInt64(start))..<(body + UInt64(start + length))))
            }
            offset = body + UInt64(slot.body.count)
        }
        regions.append(Region(part: .headerMAC, range: (h - 32)..<h))
        let layout = header.layout
        let index = reader.index
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            guard entry.kind == .file else { continue }
            let path = String(decoding: try index.path(of: entry), as: UTF8.self)
            for chunk in 0..<layout.chunkCount(forPlaintextSize: entry.fileSize) {
                let start = h + entry.payloadOffset + layout.ciphertextOffset(ofChunk: chunk)
                let sealed = layout.sealedSize(ofChunk: chunk, plaintextSize: entry.fileSize)
                regions.append(Region(part: .chunkBody(path: path, chunk: chunk), range: start..<(start + sealed - 16)))
                regions.append(Region(part: .chunkTag(path: path, chunk: chunk), range: (start + sealed - 16)..<(start + sealed)))
            }
        }
        regions.append(Region(part: .index, range: (h + header.indexOffset)..<reader.bundleSize))
        regions.sort { $0.range.lowerBound < $1.range.lowerBound }
        var expected = UInt64(0)
        for region in regions {
            guard region.range.lowerBound == expected, !region.range.isEmpty else {
                throw SubprocessError("region map does not tile the bundle at \(expected): \(region.part.description) is \(region.range)")
            }
            expected = region.range.upperBound
        }
        guard expected == reader.bundleSize else { throw SubprocessError("region map ends at \(expected), bundle at \(reader.bundleSize)") }
        self.regions = regions
        headerLength = h
        size = reader.bundleSize
        chunkSize = layout.chunkSize
    }

    /// The region holding byte `offset`.
    func region(containing offset: UInt64) -> Region {
        var low = 0
        var high = regions.count
        while high - low > 1 {
            let mid = (low + high) / 2
            if regions[mid].range.lowerBound <= offset { low = mid } else { high = mid }
        }
        return regions[low]
    }
}
