import PortalTokenCore

/// An item store that hands every call to another: a test subclasses it to change the one call
/// it is about (a read that finds an item gone, a delete that times out).
open class ForwardingItemStore: ItemStore {
    public let inner: any ItemStore

    public init(_ inner: any ItemStore) { self.inner = inner }

    open func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        try inner.search(filters)
    }

    open func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        try inner.replace(filters, ifNewest: condition, where: isPrevious, with: item)
    }

    open func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        try inner.delete(filters, where: isDoomed)
    }

    open func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem? {
        try inner.newest(filters, lastSeen: id)
    }
}
