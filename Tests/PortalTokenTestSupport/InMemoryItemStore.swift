import PortalTokenCore
import Synchronization

/// Attributed items in memory, with the item-store port's semantics: newest first, replace
/// after create, delete by attribute subset.
public final class InMemoryItemStore: ItemStore, Sendable {
    private let state = Mutex<(items: [(sequence: Int, item: StoredItem)], next: Int)>(([], 0))

    public init() {}

    private static func matches(_ item: StoredItem, _ schema: String, _ attributes: [String: String]) -> Bool {
        item.schema == schema && attributes.allSatisfy { item.attributes[$0.key] == $0.value }
    }

    public func search(schema: String, attributes: [String: String]) throws(StoreError) -> [StoredItem] {
        state.withLock { state in
            state.items.filter { Self.matches($0.item, schema, attributes) }.sorted { $0.sequence > $1.sequence }.map(
                \.item)
        }
    }

    public func replace(matching key: [String: String], with item: StoredItem) throws(StoreError) {
        state.withLock { state in
            state.items.removeAll { Self.matches($0.item, item.schema, key) }
            state.items.append((state.next, item))
            state.next += 1
        }
    }

    public func delete(schema: String, attributes: [String: String]) throws(StoreError) -> Int {
        state.withLock { state in
            let before = state.items.count
            state.items.removeAll { Self.matches($0.item, schema, attributes) }
            return before - state.items.count
        }
    }
}
