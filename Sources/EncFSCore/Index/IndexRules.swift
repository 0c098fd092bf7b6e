import CryptCore

/// The index format's rules (docs/FORMAT.md), each a small named check
/// shared by every reader of records: the flat index at open
/// (`FlatIndexValidator`), a record page at load (`RecordPage`), the
/// whole-index check of a paged index (`BundleIndex.checkWholeIndex`), and
/// through them both index fuzz targets. `IndexBuilder` and
/// `PagedIndexWriter` write records through ``IndexRecord`` only.
///
/// A rule throws a ``Violation`` naming the record; the caller says where
/// it was (a record page adds its number) and turns it into
/// `BundleError.corruptIndex`. The order in which a caller applies the
/// rules decides which violation a record with several is reported by:
/// the broken fixtures pin it (Tests/FormatTests/Fixtures).
enum IndexRules {
    /// A broken rule, in words that name the record.
    struct Violation: Error, Equatable {
        let why: String
        init(_ why: String) { self.why = why }
    }

    // MARK: - One record

    /// The kind byte names a kind.
    static func kind(of r: IndexRecord, position: Int) throws(Violation) -> IndexEntry.Kind {
        guard let kind = r.kind else { throw Violation("entry \(position) has unknown kind \(r.kindByte)") }
        return kind
    }

    /// What a file record's flags say its body is.
    enum BodyForm {
        /// Chunks at fixed offsets from the payload offset.
        case fixed
        /// Chunks found through a chunk table (compressed bundles).
        case chunkTable
        /// A slice of a fragment (bundles with fragments).
        case fragmentSlice
    }

    /// Bytes that hold nothing are zero: the flags and the chunk table
    /// offset, unless the record is a file with a chunk table in a
    /// compressed bundle or a fragment slice in a bundle with fragments,
    /// and bytes 14 … 15 always.
    ///
    /// - Returns: the form of a file's body (`.fixed` for other kinds).
    static func checkReserved(_ r: IndexRecord, kind: IndexEntry.Kind, compressed: Bool, fragments: Bool = false,
                              position: Int) throws(Violation) -> BodyForm {
        let form: BodyForm
        if kind == .file && compressed && r.flags == IndexEntry.hasChunkTableFlag {
            form = .chunkTable
        } else if kind == .file && fragments && r.flags == IndexEntry.fragmentSliceFlag {
            form = .fragmentSlice
        } else {
            form = .fixed
        }
        guard form != .fixed || (r.flags == 0 && r.chunkTable == 0), r.reservedIsZero else {
            throw Violation("entry \(position) has non-zero reserved bytes")
        }
        return form
    }

    /// Permission bits only (07777).
    static func checkMode(_ r: IndexRecord, position: Int) throws(Violation) {
        guard r.mode & ~0o7777 == 0 else { throw Violation("entry \(position) has invalid mode bits") }
    }

    /// Nanoseconds below one second.
    static func checkTime(_ r: IndexRecord, position: Int) throws(Violation) {
        guard r.mtime.nanoseconds < 1_000_000_000 else { throw Violation("entry \(position) has invalid nanoseconds") }
    }

    /// The root (position 0) is a directory, its own parent, without a
    /// name; every other entry comes after its parent.
    static func checkPlacement(_ r: IndexRecord, kind: IndexEntry.Kind, position: Int) throws(Violation) {
        if position == 0 {
            guard r.parent == 0, kind == .directory, r.name.length == 0, r.name.offset == 0 else {
                throw Violation("root entry is malformed")
            }
        } else {
            guard r.parent < position else { throw Violation("entry \(position) comes before its parent") }
        }
    }

    /// A name other than the root's is 1 … 255 bytes inside the strings.
    ///
    /// - Returns: where the name lies in the strings.
    static func nameRange(of r: IndexRecord, position: Int, stringsLength: UInt64) throws(Violation) -> Range<Int> {
        let (offset, length) = (Int(r.name.offset), Int(r.name.length))
        guard length >= 1, length <= BundleFormat.maximumNameLength, UInt64(offset + length) <= stringsLength else {
            throw Violation("entry \(position) has an invalid name")
        }
        return offset..<(offset + length)
    }

    /// A name holds no NUL and no '/' and is not "." or "..".
    static func checkNameBytes(_ name: UnsafeRawBufferPointer, position: Int) throws(Violation) {
        let dot = UInt8(ascii: ".")
        guard !name.contains(0), !name.contains(UInt8(ascii: "/")), !(name.count == 1 && name[0] == dot),
              !(name.count == 2 && name[0] == dot && name[1] == dot) else {
            throw Violation("entry \(position) has an invalid name")
        }
    }

    /// Directories and symlinks have no file id.
    static func checkNoFileID(_ r: IndexRecord, kind: IndexEntry.Kind, position: Int) throws(Violation) {
        guard kind == .file || r.fileIDIsZero else { throw Violation("\(kind.noun) \(position) has a file id") }
    }

    /// A directory's children lie after it, inside the index; an empty
    /// directory's first child is 0. (That the ranges tile the index is
    /// ``ChildTiling``'s rule.)
    static func checkDirectory(_ r: IndexRecord, position: Int, entryCount: Int) throws(Violation) {
        try checkNoFileID(r, kind: .directory, position: position)
        let (first, count) = r.children
        guard count <= UInt64(entryCount) else { throw Violation("directory \(position) has \(count) children") }
        if count > 0 {
            guard first > UInt64(position), first <= UInt64(entryCount) - count else {
                throw Violation("directory \(position) has an invalid child range")
            }
        } else {
            guard first == 0 else { throw Violation("empty directory \(position) has a child offset") }
        }
    }

    /// A file's size is one the chunk layout can address.
    static func checkFileSize(_ r: IndexRecord, position: Int, layout: ChunkLayout) throws(Violation) {
        guard layout.isValidPlaintextSize(r.payload.size) else { throw Violation("file \(position) is too large") }
    }

    /// A body of `length` stored bytes at `offset` ends inside the data
    /// region (the chunk data before the index).
    static func checkInDataRegion(offset: UInt64, length: UInt64, dataLength: UInt64, position: Int) throws(Violation) {
        guard offset <= dataLength, length <= dataLength - offset else {
            throw Violation("file \(position) lies outside the data region")
        }
    }

    /// Whether a chunk table of `chunks` entries at `offset` fits in
    /// `length` bytes (of a string table or a table stream).
    static func chunkTableFits(offset: UInt32, chunks: UInt64, in length: UInt64) -> Bool {
        let bytes = chunks.multipliedReportingOverflow(by: UInt64(ChunkTableWindow.entrySize))
        return !bytes.overflow && UInt64(offset) <= length && bytes.partialValue <= length - UInt64(offset)
    }

    // MARK: - Fragments

    /// A fragment slice holds at least one byte (an empty file is no
    /// slice), and its fragment's descriptor head lies inside the table
    /// stream (the rest of the descriptor is checked when it is used:
    /// ``checkFragment(_:at:slice:position:layout:dataLength:tableStreamLength:)``).
    static func checkFragmentSlice(_ r: IndexRecord, position: Int, tableStreamLength: UInt64) throws(Violation) {
        guard r.payload.size >= 1 else { throw Violation("file \(position) is an empty fragment slice") }
        guard UInt64(r.chunkTable) <= tableStreamLength,
              UInt64(FragmentDescriptor.headSize) <= tableStreamLength - UInt64(r.chunkTable) else {
            throw Violation("file \(position) has a fragment outside the table stream")
        }
    }

    /// A fragment's descriptor at `offset`: its plaintext is 1 byte or more
    /// and addressable, its body starts inside the data region, its chunk
    /// table lies inside the table stream; and the slice
    /// (`slice.offset ..< slice.offset + slice.size`, the file's size) lies
    /// inside the fragment's plaintext.
    static func checkFragment(_ d: FragmentDescriptor, at offset: UInt32, slice: (offset: UInt64, size: UInt64), position: Int,
                              layout: ChunkLayout, dataLength: UInt64, tableStreamLength: UInt64) throws(Violation) {
        guard d.plaintextSize >= 1, layout.isValidPlaintextSize(d.plaintextSize) else {
            throw Violation("file \(position) has a fragment of invalid size")
        }
        try checkInDataRegion(offset: d.payloadOffset, length: 0, dataLength: dataLength, position: position)
        let tableStart = FragmentDescriptor.tableOffset(ofDescriptorAt: offset)
        guard tableStart <= UInt64(UInt32.max),
              chunkTableFits(offset: UInt32(tableStart), chunks: layout.chunkCount(forPlaintextSize: d.plaintextSize),
                             in: tableStreamLength) else {
            throw Violation("file \(position) has a fragment table outside the table stream")
        }
        guard slice.offset <= d.plaintextSize, slice.size <= d.plaintextSize - slice.offset else {
            throw Violation("file \(position) lies outside its fragment")
        }
    }

    /// The slices of one fragment do not overlap, except that files with
    /// identical contents may name one slice (the same offset and size).
    ///
    /// - Parameter slices: the fragment's slices; sorted here.
    static func checkSlicesDisjoint(_ slices: inout [(offset: UInt64, size: UInt64)], fragmentAt start: UInt64) throws(Violation) {
        slices.sort { ($0.offset, $0.size) < ($1.offset, $1.size) }
        for i in slices.indices.dropFirst() {
            let (previous, slice) = (slices[i - 1], slices[i])
            if previous == slice { continue }
            guard slice.offset >= previous.offset + previous.size else {
                throw Violation("fragment at payload offset \(start) has overlapping slices")
            }
        }
    }

    /// A symlink's target is 1 … `BundleFormat.maximumSymlinkLength` bytes
    /// inside the strings.
    ///
    /// - Returns: where the target lies in the strings.
    static func targetRange(of r: IndexRecord, position: Int, stringsLength: UInt64) throws(Violation) -> Range<Int> {
        let (offset, length) = r.target
        guard length >= 1, length <= UInt64(BundleFormat.maximumSymlinkLength), offset <= stringsLength,
              length <= stringsLength - offset else { throw Violation("symlink \(position) has an invalid target") }
        return Int(offset)..<(Int(offset) + Int(length))
    }

    /// A symlink's target holds no NUL.
    static func checkTargetBytes(_ target: UnsafeRawBufferPointer, position: Int) throws(Violation) {
        guard !target.contains(0) else { throw Violation("symlink \(position) target holds NUL") }
    }

    // MARK: - Across records

    /// Breadth-first order: entries' parents never decrease.
    static func checkBreadthFirst(parent: Int, after previousParent: Int, position: Int) throws(Violation) {
        guard parent >= previousParent else { throw Violation("entry \(position) is out of breadth-first order") }
    }

    /// An entry lies in its parent's child range, and the parent is a directory.
    static func checkMembership(_ position: Int, parentIsDirectory: Bool,
                                parentChildren children: (first: UInt64, count: UInt64)) throws(Violation) {
        guard parentIsDirectory, UInt64(position) >= children.first, UInt64(position) - children.first < children.count else {
            throw Violation("entry \(position) is not among its parent's children")
        }
    }

    /// Siblings are in strictly increasing name order (memcmp, shorter
    /// prefix first): `previous` is the name of the sibling before.
    static func checkNameOrder(_ previous: UnsafeRawBufferPointer, _ name: UnsafeRawBufferPointer,
                               position: Int) throws(Violation) {
        guard compareBytes(previous, name) < 0 else {
            throw Violation("entries \(position - 1) and \(position) are not in name order")
        }
    }

    /// Directory child ranges, in record order, tile records 1 … n−1: each
    /// non-empty range starts where the one before ended.
    struct ChildTiling {
        private(set) var nextChild = 1

        /// Adds the next directory's range (checked by ``checkDirectory(_:position:entryCount:)``).
        mutating func add(directory position: Int, children: (first: UInt64, count: UInt64)) throws(Violation) {
            guard children.count > 0 else { return }
            guard children.first == UInt64(nextChild) else { throw Violation("directory \(position) has an invalid child range") }
            nextChild += Int(children.count)
        }

        /// After the last directory: the ranges covered every entry but the root.
        func checkComplete(entryCount: Int) throws(Violation) {
            guard nextChild == entryCount else { throw Violation("directory child ranges do not cover every entry") }
        }
    }

    /// File bodies do not overlap, except that files of a version 2 bundle
    /// may share one body (``BodyRecord``, equal field for field).
    ///
    /// - Parameter bodies: each file's body and where its stored bytes end;
    ///   sorted here by start.
    /// - Returns: the stored and plaintext bytes of the distinct bodies.
    static func distinctBodies(_ bodies: inout [(body: BodyRecord, end: UInt64)],
                               sharesAllowed: Bool) throws(Violation) -> (stored: UInt64, plaintext: UInt64) {
        bodies.sort { $0.body.start < $1.body.start }
        var total: (stored: UInt64, plaintext: UInt64) = (0, 0)
        for i in bodies.indices {
            if i > 0 {
                if sharesAllowed && bodies[i].body == bodies[i - 1].body { continue }
                guard bodies[i].body.start >= bodies[i - 1].end else { throw Violation("file data ranges overlap") }
            }
            total.stored &+= bodies[i].end - bodies[i].body.start
            total.plaintext &+= bodies[i].body.size
        }
        return total
    }
}
