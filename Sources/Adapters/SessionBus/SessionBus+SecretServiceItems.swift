import Basics
import Glibc
import PortalTokenCore

/// The everyday read of the Secret Service, over the bus connection this run already holds
/// for the `auto` decision and the lock check: no libsecret, no GLib, no second connection
/// (docs/storage.md, "Reading without libsecret").
///
/// Two exchanges with the provider, each a few calls sent at once and answered together:
///
/// 1. `ReadAlias("default")`, `OpenSession("plain")` (the secrets' transfer session, once per
///    connection; why `plain`: docs/storage.md, "The transfer session: `plain`"), and
///    `Service.SearchItems` with the attributes asked for;
/// 2. the default collection's `Locked` property, `GetSecrets` of every unlocked item found,
///    and each found item's properties (attributes, label, times).
///
/// Six calls to the provider for one item, where git's C helper makes six too (and fourteen
/// more to the bus daemon). Only libsecret runs an unlock prompt, so the answer is nil, and the
/// caller asks `unlockDefaultCollectionWithoutPrompt` before libsecret reads, whenever a lock is
/// in the way: the default collection is locked (some providers then
/// answer a search with nothing at all, which is not "nothing stored"), or has no alias, or an
/// item found is locked. A provider error other than "no provider" or a timeout is left to
/// libsecret too, which knows how to tell a vanished item from a failure.
extension SessionBus {
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    /// The calls every exchange with the keyring begins with: the default collection's alias and,
    /// while this connection has none, a `plain` transfer session.
    func aliasAndSessionCalls() throws(StoreError) -> [DBusMessage] {
        var calls = [
            try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "ReadAlias", "s") {
                $0.string("default")
            }
        ]
        if secretTransferSession == nil {
            calls.append(
                try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "OpenSession", "sv") {
                    $0.string("plain")
                    $0.variant("s") { $0.string("") }
                })
        }
        return calls
    }

    /// The default collection's path from the replies to `aliasAndSessionCalls`, the session
    /// kept when one was `opened`.
    func readAliasAndSession(_ replies: [DBusMessage], opened: Bool, while operation: String) throws(StoreError)
        -> String
    {
        let collection = try read(replies[0], while: operation) { reader throws(DBusWireError) in try reader.string() }
        if opened {
            secretTransferSession = try read(replies[1], while: operation) { reader throws(DBusWireError) in
                try reader.skip("v")
                return try reader.string()
            }
        }
        return collection
    }

    public func unlockedSecretServiceItems(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem]? {
        let operation = "reading the keyring"
        let searches = Self.searches(for: filters)
        guard !searches.isEmpty else { return [] }

        var first = try aliasAndSessionCalls()
        let opensSession = first.count > 1
        for attributes in searches {
            first.append(
                try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "SearchItems", "a{ss}") { call in
                    call.array(alignment: 8) { pairs in
                        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
                            pairs.structure {
                                $0.string(name)
                                $0.string(value)
                            }
                        }
                    }
                })
        }
        let answered: [DBusMessage]?
        do {
            answered = try callAll(
                first,
                deadline: Self.deadline(afterMilliseconds: KeyringBound.searchMilliseconds(of: timeoutMilliseconds)),
                while: operation)
        } catch  where error.kind == .timedOut {
            throw lockedInsteadOfTimeout(error)
        }
        guard let firstReplies = answered else { return nil }
        let collection = try readAliasAndSession(firstReplies, opened: opensSession, while: operation)
        guard collection != "/", let session = secretTransferSession else { return nil }
        var unlocked: [String] = []
        for reply in firstReplies[(opensSession ? 2 : 1)...] {
            let (found, locked) = try read(reply, while: operation) { reader throws(DBusWireError) in
                (try Self.objectPaths(&reader), try Self.objectPaths(&reader))
            }
            guard locked.isEmpty else { return nil }
            for path in found where !unlocked.contains(path) { unlocked.append(path) }
        }

        var second = [try lockedQuery(collection)]
        if !unlocked.isEmpty {
            second.append(
                try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "GetSecrets", "aoo") { call in
                    call.array(alignment: 4) { for path in unlocked { $0.string(path) } }
                    call.string(session)
                })
            for path in unlocked {
                second.append(
                    try secretServiceCall(path, Self.propertiesInterface, "GetAll", "s") {
                        $0.string("org.freedesktop.Secret.Item")
                    })
            }
        }
        guard let secondReplies = try callAll(second, while: operation) else {
            // The session may be what failed (a provider that restarted); the next read opens another.
            secretTransferSession = nil
            return nil
        }
        guard try !readLocked(secondReplies[0], while: operation) else { return nil }
        guard !unlocked.isEmpty else { return [] }
        let secrets = try readSecrets(secondReplies[1], while: operation)
        // The reply is this process's own copy; nothing reads it after.
        secondReplies[1].wipeBody()
        var items: [StoredItem] = []
        for (index, path) in unlocked.enumerated() {
            let properties = try readItemProperties(secondReplies[2 + index], while: operation)
            guard !properties.locked, let secret = secrets[path] else { return nil }
            let item = StoredItem(
                storedAttributes: properties.attributes, label: properties.label, secret: secret,
                created: properties.created, modified: properties.modified, id: path)
            if item.matches(any: filters) { items.append(item) }
        }
        return items.sorted(by: StoredItem.isListedBefore)
    }

    /// `Service.Unlock` on the default collection, within the bound; the prompt it may answer
    /// with is never run here (only libsecret prompts, and only where a prompt is allowed).
    /// True when the provider unlocked it with no prompt (`SecretServiceProvider.noPrompt`).
    public func unlockDefaultCollectionWithoutPrompt() throws(StoreError) -> Bool {
        let operation = "unlocking the keyring"
        let alias = [
            try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "ReadAlias", "s") {
                $0.string("default")
            }
        ]
        guard let aliased = try callAll(alias, while: operation) else { return false }
        let collection = try read(aliased[0], while: operation) { reader throws(DBusWireError) in try reader.string() }
        guard collection != "/" else { return false }
        let unlock = [
            try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "Unlock", "ao") { call in
                call.array(alignment: 4) { $0.string(collection) }
            }
        ]
        let answered: [DBusMessage]?
        do {
            answered = try callAll(unlock, while: operation)
        } catch  where error.kind == .timedOut {
            // A provider that holds Unlock is showing its own dialog: that is still "locked".
            return false
        }
        guard let reply = answered?.first else { return false }
        let (unlocked, prompt) = try read(reply, while: operation) { reader throws(DBusWireError) in
            (try Self.objectPaths(&reader), try reader.string())
        }
        return prompt == SecretServiceProvider.noPrompt && unlocked.contains(collection)
    }

    /// A search that ran out of time on a locked collection is "locked": KeePassXC (with "Unlock
    /// before search", its default) answers a search in a locked database only once a person
    /// unlocks it in the dialog it shows, and answers other calls meanwhile, so whether the
    /// default collection is locked is asked within the rest of the bound (`KeyringBound`: a
    /// stalled provider costs one bound in all); when it is not, the timeout stands.
    private func lockedInsteadOfTimeout(_ timeout: StoreError) -> StoreError {
        let rest = KeyringBound.lockCheckMilliseconds(of: timeoutMilliseconds)
        guard (try? isDefaultCollectionLocked(withinMilliseconds: rest)) == true else { return timeout }
        return .lockedWhileSearchHeld("the default keyring", timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The attribute sets to search for: one search when the filters differ only in their schema
    /// (git's credentials, under two schema names), matched against each filter afterwards, as
    /// git's own helper searches without the schema; else one search per filter.
    static func searches(for filters: [ItemAttributes]) -> [ItemAttributes] {
        var common = filters.first ?? [:]
        common[StoredItem.schemaAttribute] = nil
        let sameButSchema = filters.allSatisfy {
            var attributes = $0
            attributes[StoredItem.schemaAttribute] = nil
            return attributes == common
        }
        if sameButSchema, !common.isEmpty { return [common] }
        var searches: [ItemAttributes] = []
        for filter in filters where !searches.contains(filter) { searches.append(filter) }
        return searches
    }

    // MARK: Calling

    /// Sends every call at once and waits for all the replies, within the bound. nil when the
    /// provider answered any of them with an error in a way that libsecret should see for itself
    /// (and name: a vanished item); no provider, or none in time, is thrown.
    private func callAll(_ calls: [DBusMessage], deadline: Int64? = nil, while operation: String) throws(StoreError)
        -> [DBusMessage]?
    {
        let replies = try exchange(calls, deadline: deadline, while: operation)
        for reply in replies where reply.kind != .methodReturn {
            try throwIfUnavailable(reply, while: operation)
            return nil
        }
        return replies
    }

    // MARK: Reading replies

    private static func objectPaths(_ reader: inout DBusReader) throws(DBusWireError) -> [String] {
        var paths: [String] = []
        try reader.array(alignment: 4) { path throws(DBusWireError) in paths.append(try path.string()) }
        return paths
    }

    /// `GetSecrets`' answer, `a{o(oayays)}`, in a `plain` session: each item's secret is the
    /// value's bytes.
    private func readSecrets(_ reply: DBusMessage, while operation: String) throws(StoreError) -> [String: Secret] {
        try read(reply, while: operation) { reader throws(DBusWireError) in
            var secrets: [String: Secret] = [:]
            try reader.array(alignment: 8) { entry throws(DBusWireError) in
                let path = try entry.string()
                try entry.structure()
                try entry.skip("oay")
                var value = try entry.byteArray()
                secrets[path] = Secret(bytes: value)
                value.wipe()
                try entry.skip("s")
            }
            return secrets
        }
    }

    private struct ItemProperties {
        var attributes: ItemAttributes = [:]
        var label = ""
        var locked = true
        var created: Int64? = 0
        var modified: Int64? = 0
    }

    /// `Properties.GetAll` of an item, `a{sv}`.
    private func readItemProperties(_ reply: DBusMessage, while operation: String) throws(StoreError)
        -> ItemProperties
    {
        try read(reply, while: operation) { reader throws(DBusWireError) in
            var properties = ItemProperties()
            try reader.array(alignment: 8) { entry throws(DBusWireError) in
                switch try entry.string() {
                case "Attributes":
                    try entry.variant("a{ss}")
                    try entry.array(alignment: 8) { pair throws(DBusWireError) in
                        let key = try pair.string()
                        properties.attributes[key] = try pair.string()
                    }
                case "Label":
                    try entry.variant("s")
                    properties.label = try entry.string()
                case "Locked":
                    try entry.variant("b")
                    properties.locked = try entry.bool()
                case "Created":
                    try entry.variant("t")
                    properties.created = Int64(clamping: try entry.uint64())
                case "Modified":
                    try entry.variant("t")
                    properties.modified = Int64(clamping: try entry.uint64())
                default:
                    try entry.skip("v")
                }
            }
            return properties
        }
    }
}
