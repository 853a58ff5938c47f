/// Moving what one store holds into another: every store keeps the same items, so a migration
/// copies items (docs/storage.md, "Migrating").
///
/// - The newer item of a slot wins, by the items' own modification and creation times; an item
///   the destination holds as new or newer is kept as it is.
/// - Nothing is deleted here: the caller clears the source only after this returned, so an
///   interrupted migration runs again to completion.
public enum ItemMigration {
    /// What a migration did.
    public struct Outcome {
        /// Items written to the destination.
        public var moved: [StoredItem] = []
        /// Items of the source whose slot the destination holds newer, with the same secret.
        public var superseded: [StoredItem] = []
        /// Items of the source whose slot the destination holds newer, with another secret: the
        /// source is their only copy.
        public var differing: [StoredItem] = []

        public var kept: Int { superseded.count + differing.count }
    }

    /// Every item portal-token reads: git credentials, Portal sessions, two-factor steps.
    public static let everything: [ItemAttributes] =
        CredentialItems.filters(for: CredentialQuery())
        + [SessionItems.schema, TwoFactorStepItems.schema].map { [StoredItem.schemaAttribute: $0] }

    /// The filters that find the items of `item`'s slot, and the test that tells an item of that
    /// slot from any other (one that only shares some attributes included); nil for an item of
    /// no kind portal-token knows.
    public static func slot(of item: StoredItem) -> (filters: [ItemAttributes], isSame: (StoredItem) -> Bool)? {
        switch item.schema {
        case SessionItems.schema, TwoFactorStepItems.schema:
            // A session's slot is its environment and end user; a step's, its environment.
            guard let environment = item.attributes["auth-environment-id"] else { return nil }
            var filter = [StoredItem.schemaAttribute: item.schema, "auth-environment-id": environment]
            if item.schema == SessionItems.schema, let endUser = item.attributes["end-user-id"] {
                filter["end-user-id"] = endUser
            }
            return ([filter], { $0.matches(filter) })
        default:
            guard let credential = CredentialItems.credential(from: item) else { return nil }
            let slot = CredentialQuery(
                protocolName: credential.protocolName, host: credential.host, path: credential.path,
                username: credential.username)
            return (
                CredentialItems.filters(for: slot),
                { CredentialItems.credential(from: $0)?.occupiesSameSlot(as: credential) ?? false }
            )
        }
    }

    /// Copies every item of `source` into `destination` where the destination holds nothing
    /// newer in its slot.
    public static func copy(from source: any ItemStore, to destination: any ItemStore) throws(StoreError) -> Outcome {
        var outcome = Outcome()
        var done: [(StoredItem) -> Bool] = []
        // Newest first: an older duplicate of a slot already copied is superseded.
        for item in try source.search(everything) {
            guard let slot = slot(of: item) else { continue }
            if done.contains(where: { $0(item) }) {
                outcome.superseded.append(item)
                continue
            }
            done.append(slot.isSame)
            if let present = try destination.search(slot.filters).first(where: slot.isSame),
                !item.isNewer(than: present)
            {
                if present.secret == item.secret {
                    outcome.superseded.append(item)
                } else {
                    outcome.differing.append(item)
                }
                continue
            }
            try destination.replace(slot.filters, where: slot.isSame, with: item)
            outcome.moved.append(item)
        }
        return outcome
    }
}
