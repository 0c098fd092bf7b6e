import CryptCore

/// Which key slots a rekey removes, keeps, makes again or adds, worked out
/// before anything is written.
///
/// Adding slots only (no removal) keeps every slot byte for byte and
/// appends the new ones under the same content key. Removing slots
/// re-encrypts under a new content key (``BundleRekeyer``), so every kept
/// slot must be made again, and that needs its holder: a raw key or
/// passphrase (which a slot only stores wrapped or hashed), or a
/// recipient's public key. Recipient slots store 8 bytes of the public
/// key's SHA-256 fingerprint, not the key (an X25519 slot holds the
/// ephemeral share, an RSA slot the OAEP ciphertext), so they cannot be
/// made again from the slot. Holders come from the secrets that opened the
/// bundle and from the secrets and public keys given to add; each is
/// matched to the slots it opens (raw keys and identities by key id or
/// fingerprint, passphrases by one scrypt run per passphrase slot, public
/// keys by fingerprint). A kept slot no holder matches is refused, naming
/// it, instead of being dropped in silence.
struct RekeyPlan {
    /// A secret or public key a slot can be made for.
    enum Holder {
        case material(KeyMaterial)
        case recipient(PublicKey)
    }

    /// How one slot of the new header is made, in order.
    enum Step {
        /// An old slot, kept byte for byte (same content key and bundle id).
        case keep(KeySlot)
        /// An old slot made again for the new content key from its holder:
        /// same kind and holder (a passphrase also keeps its scrypt cost).
        case remake(KeySlot, Holder)
        /// A new slot.
        case add(Holder)
    }

    /// The new header's slots, in order: kept or re-made ones where they
    /// were, added ones last.
    let steps: [Step]
    /// How many old slots go.
    let removed: Int
    /// Whether the payload is re-encrypted under a new content key and
    /// bundle id (any slot removed).
    var reencrypts: Bool { removed > 0 }

    /// Plans `changes` for the authenticated `header`, opened with
    /// `contentKey`.
    ///
    /// - Throws: `BundleError.unknownSlot` for a fingerprint no slot has,
    ///   `.lastSlotRemoved` for removing every slot without adding one,
    ///   `.removedSlotKeyGiven` for a secret to add that opens a slot being
    ///   removed; `.slotsNotCarriedOver` naming the
    ///   kept slots no holder matches; `.limitExceeded` for too many slots
    ///   or too much scrypt work; `.corruptHeader` for a slot that matches
    ///   a holder's id but does not open.
    static func make(header: BundleHeader, contentKey: SymmetricKey, changes: BundleRekeyer.Changes) throws -> RekeyPlan {
        let removing = Set(changes.remove.map { $0.lowercased() })
        // Only key slots: the signature slot is the rekeyer's to keep, drop
        // or make again, and it never counts as the last slot.
        for fingerprint in changes.remove where !header.keySlots.contains(where: { $0.fingerprint == fingerprint.lowercased() }) {
            throw BundleError.unknownSlot(fingerprint: fingerprint)
        }
        var kept: [KeySlot] = []
        var gone: [KeySlot] = []
        for slot in header.keySlots {
            if removing.contains(slot.fingerprint) { gone.append(slot) } else { kept.append(slot) }
        }
        let added: [Holder] = changes.addKeys.map { .material($0) } + changes.addRecipients.map { .recipient($0) }
        guard !kept.isEmpty || !added.isEmpty else { throw BundleError.lastSlotRemoved }

        let steps: [Step]
        if gone.isEmpty {
            steps = kept.map { .keep($0) } + added.map { .add($0) }
        } else {
            steps = try carryOver(kept: kept, removed: gone, openers: changes.openedWith, added: added, header: header,
                                  contentKey: contentKey)
        }
        guard steps.count <= BundleFormat.maximumSlots else {
            throw BundleError.limitExceeded("more than \(BundleFormat.maximumSlots) key slots")
        }
        // Before any scrypt run that makes a slot: readers refuse more
        // passphrase work than this.
        try KeySlot.checkTotalScryptWork(steps.compactMap { step in
            switch step {
            case .keep(let slot), .remake(let slot, _): return slot.scryptWork
            case .add(.material(.passphrase)): return KeySlot.work(of: changes.scrypt)
            case .add: return nil
            }
        })
        return RekeyPlan(steps: steps, removed: gone.count)
    }

    /// Matches holders to the kept slots of a removal.
    ///
    /// Openers are tried on the kept slots only (opening with the secret
    /// being removed is allowed); secrets to add are tried on every slot: one
    /// that opens a removed slot is refused, since adding it back would undo
    /// the removal, and one that opens a kept slot makes that slot again
    /// instead of a second slot for the same holder.
    private static func carryOver(kept: [KeySlot], removed: [KeySlot], openers: [KeyMaterial], added: [Holder],
                                  header: BundleHeader, contentKey: SymmetricKey) throws -> [Step] {
        // Each passphrase tries each passphrase slot once: bound the work
        // as a reader does before its first scrypt run.
        if (openers + materials(of: added)).contains(where: { if case .passphrase = $0 { true } else { false } }) {
            try KeySlot.checkTotalScryptWork(header.slots.compactMap(\.scryptWork))
        }
        var holders = [Holder?](repeating: nil, count: kept.count)
        for opener in openers {
            for i in kept.indices where holders[i] == nil {
                if try opens(.material(opener), kept[i], header: header, contentKey: contentKey) { holders[i] = .material(opener) }
            }
        }
        var steps: [Step] = []
        var newcomers: [Holder] = []
        for holder in added {
            for slot in removed where try opens(holder, slot, header: header, contentKey: contentKey) {
                throw BundleError.removedSlotKeyGiven(kind: slot.kindName, fingerprint: slot.fingerprint)
            }
            var matched = false
            for i in kept.indices where try opens(holder, kept[i], header: header, contentKey: contentKey) {
                if holders[i] == nil { holders[i] = holder }
                matched = true
            }
            if !matched { newcomers.append(holder) }
        }
        var missing: [String] = []
        for (slot, holder) in zip(kept, holders) {
            if let holder { steps.append(.remake(slot, holder)) } else { missing.append("\(slot.kindName) \(slot.fingerprint)") }
        }
        guard missing.isEmpty else { throw BundleError.slotsNotCarriedOver(missing) }
        return steps + newcomers.map { .add($0) }
    }

    private static func materials(of holders: [Holder]) -> [KeyMaterial] {
        holders.compactMap { if case .material(let m) = $0 { m } else { nil } }
    }

    /// Whether `holder` opens `slot` to this bundle's content key, or, for a
    /// public key, is the recipient the slot was made for (its fingerprint
    /// and kind; without the private key that is all that can be checked).
    private static func opens(_ holder: Holder, _ slot: KeySlot, header: BundleHeader, contentKey: SymmetricKey) throws -> Bool {
        switch holder {
        case .material(let material):
            let position = (header.slots.firstIndex(of: slot) ?? 0) + 1
            guard let key = try slot.unwrap(with: material, bundleID: header.bundleID, position: position) else { return false }
            // The header MAC covers every slot, so a slot wrapping another
            // key was made by a content-key holder on purpose; its secret
            // still does not open this bundle.
            return key == contentKey
        case .recipient(let publicKey):
            switch (slot.kind, publicKey.kind) {
            case (.x25519?, .x25519), (.rsa?, .rsa):
                return try slot.keyID == KeySlot.fingerprint(of: publicKey)
            default:
                return false
            }
        }
    }

    /// The new header's slots for `contentKey` and `bundleID`: kept slots
    /// as they are, re-made and added ones wrapping `contentKey`.
    ///
    /// - Parameter scrypt: the cost of added passphrase slots; re-made ones
    ///   keep their own.
    /// - Throws: `BundleError.crypto` when making a slot fails.
    func slots(contentKey: SymmetricKey, bundleID: [UInt8], scrypt: Scrypt.Parameters) throws -> [KeySlot] {
        try steps.map { step in
            switch step {
            case .keep(let slot):
                return slot
            case .remake(let slot, let holder):
                return try Self.make(holder, contentKey: contentKey, bundleID: bundleID, scrypt: slot.scryptParameters ?? scrypt)
            case .add(let holder):
                return try Self.make(holder, contentKey: contentKey, bundleID: bundleID, scrypt: scrypt)
            }
        }
    }

    private static func make(_ holder: Holder, contentKey: SymmetricKey, bundleID: [UInt8], scrypt: Scrypt.Parameters) throws -> KeySlot {
        switch holder {
        case .material(let material): return try KeySlot.make(for: material, wrapping: contentKey, bundleID: bundleID, scrypt: scrypt)
        case .recipient(let key): return try KeySlot.recipient(wrapping: contentKey, to: key, bundleID: bundleID)
        }
    }
}
