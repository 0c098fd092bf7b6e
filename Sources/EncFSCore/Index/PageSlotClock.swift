/// Which index page sits in which cache slot, and the clock (second
/// chance) rule that picks the slot to reuse on a miss. Shared by both
/// page caches of the index (the v1 flat index's ``IndexPages`` and the v2
/// paged index's ``PagedIndexStore``), which differ in what a slot holds
/// and how a page is loaded, not in which page is evicted.
///
/// Not thread-safe: its owner calls it under its own lock.
struct PageSlotClock {
    let slotCount: Int
    /// The page in each slot, −1 when free.
    private var pageInSlot: [Int]
    /// The slot holding each page, −1 when not cached.
    private var slotOfPage: [Int32]
    /// Per slot: used since the hand last passed it.
    private var referenced: [Bool]
    private var hand = 0

    /// An empty cache of `slotCount` slots for pages 0 ..< `pageCount`.
    init(slotCount: Int, pageCount: Int) {
        self.slotCount = slotCount
        pageInSlot = Array(repeating: -1, count: slotCount)
        slotOfPage = Array(repeating: -1, count: pageCount)
        referenced = Array(repeating: false, count: slotCount)
    }

    /// The cached pages, in ascending order (for tests and status).
    var cachedPages: [Int] { pageInSlot.filter { $0 >= 0 }.sorted() }

    /// The slot holding `page`, or nil when it is not cached.
    func slot(holding page: Int) -> Int? {
        let slot = Int(slotOfPage[page])
        return slot < 0 ? nil : slot
    }

    /// Notes a use of `slot`, so the hand passes it once before evicting.
    mutating func touch(_ slot: Int) {
        referenced[slot] = true
    }

    /// The slot to reuse: a free one, else the first unreferenced one the
    /// hand finds (clearing reference bits as it passes). An evicted page
    /// is forgotten at once; the caller loads the new one, then calls
    /// ``place(_:in:)``.
    mutating func victim() -> Int {
        while true {
            let slot = hand
            hand = (hand + 1) % slotCount
            if pageInSlot[slot] < 0 { return slot }
            if !referenced[slot] {
                slotOfPage[pageInSlot[slot]] = -1
                pageInSlot[slot] = -1
                return slot
            }
            referenced[slot] = false
        }
    }

    /// Records that `slot` now holds `page` (not yet referenced).
    mutating func place(_ page: Int, in slot: Int) {
        pageInSlot[slot] = page
        slotOfPage[page] = Int32(slot)
        referenced[slot] = false
    }
}
