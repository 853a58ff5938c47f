import PortalTokenCore

/// A store under the item-store contract, and how to see it locked (a keyring's collection
/// locked, the file opened without its passphrase, a failing memory store).
public struct ContractStore {
    public typealias Locking = () throws -> (items: any ItemStore, unlock: () throws -> Void)
    public let items: any ItemStore
    /// Locks the store; returns it as seen locked, and what unlocks it again. nil where the test
    /// process cannot lock it without disturbing others: the shared test keyring, which only a
    /// prompt unlocks (its locking is checked by the binary tests on a private keyring).
    public let lock: Locking?
    /// The same store as another process opens it.
    public let another: () -> any ItemStore

    public init(_ items: any ItemStore, another: @escaping () -> any ItemStore, lock: Locking? = nil) {
        self.items = items
        self.another = another
        self.lock = lock
    }
}

/// One check of the item-store contract: what every `ItemStore` does, whatever keeps the bytes
/// (memory, the encrypted file, a Secret Service provider). Each check works under a schema of
/// its own, so checks can share a real keyring.
public struct ItemStoreContractCheck: Sendable, CustomStringConvertible {
    public let description: String
    let body: @Sendable (ContractStore, String) throws -> Void

    public func run(on store: ContractStore) throws {
        try body(store, "io.portalhq.PortalToken.Contract\(UInt32.random(in: 0...UInt32.max))")
    }
}

private func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ContractFailure(message()) }
}

private func item(_ schema: String, _ attributes: ItemAttributes, label: String = "label", secret: String) -> StoredItem
{
    var attributes = attributes
    attributes[StoredItem.schemaAttribute] = schema
    return StoredItem(attributes: attributes, label: label, secret: Secret(secret))
}

private func filter(_ schema: String, _ attributes: ItemAttributes = [:]) -> ItemAttributes {
    var attributes = attributes
    attributes[StoredItem.schemaAttribute] = schema
    return attributes
}

private func secrets(_ items: [StoredItem]) -> [String] { items.map(\.secret.text) }

public enum ItemStoreContract {
    public static let checks: [ItemStoreContractCheck] = [
        .init(description: "an item reads back with its attributes, label and secret") { store, schema in
            let written = item(
                schema, ["a": "1", "b": "two words/é"], label: "A label: with/slash", secret: "s1\nline")
            try store.items.replace([filter(schema, ["a": "1"])], with: written)
            defer { _ = try? store.items.delete([filter(schema)]) }
            let found = try store.items.search([filter(schema)])
            try expect(found.count == 1, "expected one item, found \(found.count)")
            try expect(found[0].attributes == written.attributes, "the attributes changed: \(found[0].attributes)")
            try expect(found[0].label == written.label, "the label changed: '\(found[0].label)'")
            try expect(found[0].secret == written.secret, "the secret changed")
        },
        .init(description: "search matches a subset of the attributes, and only items of the schema") { store, schema in
            let items = store.items
            try items.replace([filter(schema, ["k": "x"])], with: item(schema, ["k": "x", "extra": "1"], secret: "x"))
            try items.replace([filter(schema, ["k": "y"])], with: item(schema, ["k": "y"], secret: "y"))
            try items.replace(
                [filter(schema + ".Other", ["k": "x"])], with: item(schema + ".Other", ["k": "x"], secret: "other"))
            defer {
                _ = try? items.delete([filter(schema), filter(schema + ".Other")])
            }
            try expect(secrets(try items.search([filter(schema, ["k": "x"])])) == ["x"], "subset search")
            try expect(Set(secrets(try items.search([filter(schema)]))) == ["x", "y"], "schema-only search")
            try expect(try items.search([filter(schema, ["k": "z"])]).isEmpty, "a value no item has matched")
            try expect(try items.search([filter(schema, ["missing": "x"])]).isEmpty, "an attribute no item has matched")
        },
        .init(description: "one search looks in several schemas, each item once") { store, schema in
            let items = store.items
            let other = schema + ".Other"
            try items.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "first"))
            try items.replace([filter(other, ["j": "1"])], with: item(other, ["j": "1"], secret: "second"))
            defer { _ = try? items.delete([filter(schema), filter(other)]) }
            let found = try items.search([filter(schema, ["k": "1"]), filter(other, ["j": "1"]), filter(schema)])
            try expect(
                secrets(found) == ["second", "first"], "expected both, newest first, once each: \(secrets(found))")
        },
        .init(description: "search answers the newest first") { store, schema in
            let items = store.items
            for name in ["a", "b", "c"] {
                try items.replace([filter(schema, ["n": name])], with: item(schema, ["n": name], secret: name))
            }
            defer { _ = try? items.delete([filter(schema)]) }
            try expect(secrets(try items.search([filter(schema)])) == ["c", "b", "a"], "not newest first")
            try items.replace([filter(schema, ["n": "a"])], with: item(schema, ["n": "a"], secret: "a2"))
            try expect(
                secrets(try items.search([filter(schema)])) == ["a2", "c", "b"], "a replaced item is not the newest")
        },
        .init(description: "replace removes only the previous items its test accepts") { store, schema in
            let items = store.items
            try items.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "keep"))
            try items.replace(
                [filter(schema, ["k": "1"])], where: { _ in false },
                with: item(schema, ["k": "1", "p": "x"], secret: "new"))
            defer { _ = try? items.delete([filter(schema)]) }
            try expect(
                Set(secrets(try items.search([filter(schema)]))) == ["keep", "new"], "a previous item it refused went")
            try items.replace(
                [filter(schema, ["k": "1"])], where: { $0.secret == Secret("keep") },
                with: item(schema, ["k": "1"], secret: "newest"))
            try expect(
                Set(secrets(try items.search([filter(schema)]))) == ["new", "newest"],
                "the accepted previous item stayed")
        },
        .init(description: "a conditional write whose condition fails writes nothing") { store, schema in
            let items = store.items
            var seen: [String?] = []
            try expect(
                try items.replace(
                    [filter(schema)],
                    ifNewest: {
                        seen.append($0?.secret.text); return false
                    }, where: { _ in true },
                    with: item(schema, ["k": "1"], secret: "refused")) == false,
                "a refused write said it wrote")
            try expect(seen.last == .some(nil), "the condition did not see that nothing is stored")
            try expect(try items.search([filter(schema)]).isEmpty, "a refused write stored an item")
            try items.replace([filter(schema)], with: item(schema, ["k": "1"], secret: "old"))
            try items.replace([filter(schema, ["k": "2"])], with: item(schema, ["k": "2"], secret: "newest"))
            defer { _ = try? items.delete([filter(schema)]) }
            try expect(
                try items.replace(
                    [filter(schema)], ifNewest: { $0?.secret == Secret("old") }, where: { _ in true },
                    with: item(schema, ["k": "1"], secret: "refused")) == false,
                "a write on a condition about an older item said it wrote")
            try expect(
                Set(secrets(try items.search([filter(schema)]))) == ["old", "newest"],
                "a write whose condition failed changed what is stored")
            try expect(
                try items.replace(
                    [filter(schema)], ifNewest: { $0?.secret == Secret("newest") },
                    where: { $0.secret != Secret("old") },
                    with: item(schema, ["k": "2"], secret: "written")) == true,
                "a write whose condition holds said it did not write")
            try expect(
                Set(secrets(try items.search([filter(schema)]))) == ["old", "written"],
                "a write whose condition holds did not replace the newest item")
        },
        .init(description: "delete removes what matches and its test accepts, and counts it") { store, schema in
            let items = store.items
            for name in ["a", "b", "c"] {
                try items.replace(
                    [filter(schema, ["n": name])], with: item(schema, ["n": name, "g": "1"], secret: name))
            }
            defer { _ = try? items.delete([filter(schema)]) }
            try expect(
                try items.delete([filter(schema, ["g": "1"])], where: { $0.secret == Secret("b") }) == 1,
                "delete with a test removed another count")
            try expect(Set(secrets(try items.search([filter(schema)]))) == ["a", "c"], "the wrong item went")
            try expect(try items.delete([filter(schema, ["n": "zzz"])]) == 0, "deleting nothing counted something")
            try expect(try items.delete([filter(schema)]) == 2, "delete of the schema did not count both")
            try expect(try items.search([filter(schema)]).isEmpty, "an item survived delete")
        },
        .init(description: "what another handle writes or deletes is seen at once; a vanished item is gone") {
            store, schema in
            let items = store.items, other = store.another()
            try items.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "first"))
            defer { _ = try? items.delete([filter(schema)]) }
            try expect(secrets(try other.search([filter(schema)])) == ["first"], "another handle missed a write")
            try other.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "second"))
            try expect(secrets(try items.search([filter(schema)])) == ["second"], "a write by another handle unseen")
            try expect(try other.delete([filter(schema)]) == 1, "another handle did not delete")
            try expect(try items.search([filter(schema)]).isEmpty, "a deleted item was still answered")
            try expect(try items.delete([filter(schema)]) == 0, "an item already deleted was counted")
        },
        .init(description: "a locked store is an error, never an empty answer, and loses nothing") { store, schema in
            guard let lock = store.lock else { return }
            let items = store.items
            try items.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "kept"))
            defer { _ = try? items.delete([filter(schema)]) }
            let (locked, unlock) = try lock()
            var searchFailed = false, deleteFailed = false, replaceFailed = false
            do { _ = try locked.search([filter(schema)]) } catch {
                searchFailed = (error as? StoreError)?.kind == .locked
            }
            do { _ = try locked.delete([filter(schema)]) } catch {
                deleteFailed = (error as? StoreError)?.kind == .locked
            }
            do {
                try locked.replace([filter(schema, ["k": "1"])], with: item(schema, ["k": "1"], secret: "new"))
            } catch { replaceFailed = (error as? StoreError)?.kind == .locked }
            try unlock()
            try expect(searchFailed, "a search of a locked store did not fail as locked")
            try expect(deleteFailed, "a delete in a locked store did not fail as locked")
            try expect(replaceFailed, "a write to a locked store did not fail as locked")
            try expect(secrets(try items.search([filter(schema)])) == ["kept"], "the item was lost while locked")
        },
    ]
}
