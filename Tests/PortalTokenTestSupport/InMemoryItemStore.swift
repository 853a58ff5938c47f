import PortalTokenCore
import Synchronization

/// Attributed items in memory, with the item-store port's semantics: newest first by sequence,
/// replace after create, delete by filter and predicate. It runs the contract suites beside the
/// real stores, so the suites themselves are checked.
public final class InMemoryItemStore: ItemStore, @unchecked Sendable {
    private let state = Mutex<(items: [StoredItem], next: Int64)>(([], 1))
    /// When set, every operation fails with it (a locked or dead store).
    public let failure = Mutex<StoreError?>(nil)
    /// When set, writes fail with it and reads work: a keyring that locks between a read and a
    /// write, or a full disk.
    public let writeFailure = Mutex<StoreError?>(nil)
    /// How many searches were asked for.
    public let searches = Mutex<Int>(0)
    /// How many writes were asked for, failed ones included.
    public let writes = Mutex<Int>(0)

    public init() {}

    private func check(writing: Bool) throws(StoreError) {
        if writing { writes.withLock { $0 += 1 } } else { searches.withLock { $0 += 1 } }
        if let error = failure.withLock({ $0 }) { throw error }
        if writing, let error = writeFailure.withLock({ $0 }) { throw error }
    }

    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        try check(writing: false)
        return state.withLock { state in
            state.items.filter { $0.matches(any: filters) }.sorted { $0.sequence > $1.sequence }
        }
    }

    @discardableResult
    public func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        try check(writing: true)
        return state.withLock { state in
            let newest = state.items.filter { $0.matches(any: filters) }.max { $0.sequence < $1.sequence }
            guard condition(newest) else { return false }
            state.items.removeAll { $0.matches(any: filters) && isPrevious($0) }
            var item = item
            item.sequence = state.next
            item.id = String(state.next)
            state.items.append(item)
            state.next += 1
            return true
        }
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        try check(writing: true)
        return state.withLock { state in
            let before = state.items.count
            state.items.removeAll { $0.matches(any: filters) && isDoomed($0) }
            return before - state.items.count
        }
    }
}
