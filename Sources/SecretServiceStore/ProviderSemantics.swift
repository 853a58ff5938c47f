import Glibc
import PortalTokenCore

/// What a Secret Service client must do the same way on every provider (gnome-keyring,
/// KeePassXC, KWallet, oo7), whichever path reads the items: one place, so that every reader
/// and writer of the keyring agrees (docs/storage.md, "Providers").
enum ProviderSemantics {
    /// The attribute in which portal-token stores the order of its writes, a number that only
    /// grows (nanoseconds of the wall clock, and past every item it replaces). Providers keep
    /// `Modified` in whole seconds, some not at all, and KeePassXC names items by UUID, so
    /// neither orders items.
    static let sequenceAttribute = "portal-token:sequence"

    /// The attributes KeePassXC adds to every item it exposes (its entry's fields). portal-token's
    /// schemas never use these names, so they are the provider's and are left out of what the
    /// store answers.
    static let providerAddedAttributes: Set<String> = ["Title", "UserName", "URL", "Notes", "Uuid", "Path"]

    /// An item's own attributes: without those the provider added and without the sequence.
    static func ownAttributes(_ attributes: [String: String]) -> [String: String] {
        attributes.filter { !providerAddedAttributes.contains($0.key) && $0.key != sequenceAttribute }
    }

    /// Whether an item with `attributes` answers a search for `filter`: it carries every
    /// attribute of the filter with the same value, whatever else it carries (a subset match,
    /// as the Secret Service's own SearchItems).
    static func matches(_ attributes: [String: String], _ filter: [String: String]) -> Bool {
        filter.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// An item's place in the order of writes: the sequence portal-token stored with it, else,
    /// for an item another program wrote, its `Modified` (or `Created`) time in the same unit.
    static func sequence(of attributes: [String: String], modified: UInt, created: UInt) -> Int64 {
        if let stored = attributes[sequenceAttribute].flatMap({ Int64($0) }) { return stored }
        return Int64(clamping: max(modified, created)) &* 1_000_000_000
    }

    /// The sequence of a write that replaces items with `existing` sequences: the wall clock in
    /// nanoseconds, and past each of them even if the clock stepped back.
    static func nextSequence(after existing: [Int64]) -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let clock = Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
        return max(clock, (existing.max() ?? 0) &+ 1)
    }

    /// Whether the prompt path `Unlock`, `Lock`, `Delete` or `CreateItem` answered means no
    /// prompt is needed: `/`, the operation is done (gnome-keyring and kwalletd unlock some
    /// collections silently when asked).
    static func isNoPrompt(_ promptPath: String) -> Bool { promptPath == "/" }
}
