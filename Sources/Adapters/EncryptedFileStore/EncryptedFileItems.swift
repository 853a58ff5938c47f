import Glibc
import PortalTokenCore

/// The item-store port on the encrypted file: the same items the Secret Service keeps, in one
/// list, ordered by the sequence number each write stamps on its item (docs/file-format.md).
/// The label and the times are kept with the item.
extension EncryptedFileStore: ItemStore {
    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        try read().items.filter { $0.matches(any: filters) }.sorted { $0.sequence > $1.sequence }.map { item in
            var item = item
            item.id = String(item.sequence)
            return item
        }
    }

    /// The check and the write are one read-modify-write of the file, under its lock.
    @discardableResult
    public func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        var written = false
        try modify { payload in
            let newest = payload.items.filter { $0.matches(any: filters) }.max { $0.sequence < $1.sequence }
            written = condition(newest)
            guard written else { return false }
            payload.items.removeAll { $0.matches(any: filters) && isPrevious($0) }
            payload.append(item, at: Int64(time(nil)))
            return true
        }
        return written
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        var removed = 0
        try modify { payload in
            let before = payload.items.count
            payload.items.removeAll { $0.matches(any: filters) && isDoomed($0) }
            removed = before - payload.items.count
            return removed > 0
        }
        return removed
    }
}
