import CLibSecret
import PortalTokenCore

/// git credentials in the freedesktop Secret Service, laid out exactly as git-credential-libsecret
/// lays them out (product contract §6), so that either helper reads what the other wrote.
public final class SecretServiceStore: CredentialStore {
    /// git 2.45 and later store under this schema name.
    public static let schemaName = "org.git.Password"
    /// git 2.39 (Debian 12) stores under libsecret's compatibility schema.
    public static let legacySchemaName = "org.gnome.keyring.NetworkPassword"

    /// A credential git's helper cannot represent (an `authtype`/`credential` pair with no
    /// password, git 2.46+) is kept under portal-token's own schema, with its protocol in the
    /// attribute `credential-protocol` instead of `protocol`. git's helper searches by `protocol`
    /// and ignores schema names, so it never finds such an item: it is neither handed to git as
    /// an empty password nor overwritten by git's own items. Every other credential keeps git's
    /// layout, its pair in extra secret lines that git's helper skips (see `SecretPacking`).
    public static let bearerOnlySchemaName = "io.portalhq.PortalToken.Credential"
    static let bearerOnlyProtocolAttribute = "credential-protocol"

    /// Which of the two layouts an item uses.
    enum Layout: CaseIterable {
        case git, bearerOnly

        init(of credential: Credential) { self = credential.isBearerOnly ? .bearerOnly : .git }

        var protocolAttribute: String { self == .git ? "protocol" : SecretServiceStore.bearerOnlyProtocolAttribute }

        /// The layouts a query must search: bearer-only items only when it includes them.
        static func searched(by query: CredentialQuery) -> [Layout] {
            query.includesBearerOnly ? [.git, .bearerOnly] : [.git]
        }
    }

    private let connection: SecretServiceConnection

    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on each libsecret call.
    ///   - allowPrompt: whether the keyring may show an unlock prompt; true only when a person
    ///     is at a terminal (stdin or stderr is a tty).
    public init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        connection = SecretServiceConnection(timeoutMilliseconds: timeoutMilliseconds, allowPrompt: allowPrompt)
    }

    /// Connects to the session bus and has the Secret Service answer within the bound, for
    /// `auto` to decide whether the keyring can serve (product contract §6). A missing bus or
    /// provider throws `.unavailable`, one that does not answer in time `.timedOut`.
    public func probe() throws(StoreError) {
        try connection.ping()
    }

    nonisolated(unsafe) private static let schema = makeSchema(
        name: schemaName,
        attributes: [
            ("user", SECRET_SCHEMA_ATTRIBUTE_STRING), ("object", SECRET_SCHEMA_ATTRIBUTE_STRING),
            ("protocol", SECRET_SCHEMA_ATTRIBUTE_STRING), ("port", SECRET_SCHEMA_ATTRIBUTE_INTEGER),
            ("server", SECRET_SCHEMA_ATTRIBUTE_STRING),
        ])

    nonisolated(unsafe) private static let bearerOnlySchema = makeSchema(
        name: bearerOnlySchemaName,
        attributes: [
            ("user", SECRET_SCHEMA_ATTRIBUTE_STRING), ("object", SECRET_SCHEMA_ATTRIBUTE_STRING),
            (bearerOnlyProtocolAttribute, SECRET_SCHEMA_ATTRIBUTE_STRING), ("port", SECRET_SCHEMA_ATTRIBUTE_INTEGER),
            ("server", SECRET_SCHEMA_ATTRIBUTE_STRING),
        ])

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        var matches: [(credential: Credential, order: ItemOrder)] = []
        for layout in Layout.searched(by: query) {
            let found = try search(query, layout: layout, loadSecrets: true, while: "looking up a credential")
            for item in found.items where Self.isCredential(item, in: layout) {
                // The item is there but its secret is not: a locked collection must never read as
                // "nothing stored"; an item deleted since the search is simply gone.
                guard let credential = Self.credential(from: item, in: layout, loadingSecret: true) else {
                    try connection.ensureItemIsGone(item)
                    continue
                }
                if query.matches(credential) { matches.append((credential, item.order)) }
            }
        }
        if matches.isEmpty { try connection.ensureDefaultCollectionIsNotLocked() }
        return matches.sorted { $0.order > $1.order }.map(\.credential)
    }

    public func store(_ credential: Credential) throws(StoreError) {
        let collection = try connection.unlockedDefaultCollection()
        // Items of the same slot, from either schema. gnome-keyring's own "replace" matches on a
        // subset of attributes and would overwrite a credential that has a port or path, so the
        // slot is matched here, exactly, and old items go only after the new one is safe.
        let slot = CredentialQuery(
            protocolName: credential.protocolName, host: credential.host,
            path: credential.path, username: credential.username)
        // The slot's items in both layouts: a bearer-only credential replaces a password one
        // of the same slot, and the other way round.
        let existing = try Layout.allCases.map { (layout) throws(StoreError) in
            (layout, try search(slot, layout: layout, loadSecrets: false, while: "storing a credential"))
        }
        let packed = SecretPacking.pack(credential)
        let layout = Layout(of: credential)
        let createdPath = try connection.create(
            in: collection, schema: layout == .git ? Self.schema : Self.bearerOnlySchema,
            attributes: Self.attributes(of: slot, in: layout),
            label: credential.keyringLabel, secret: packed, while: "storing a credential")
        for (searched, found) in existing {
            let exactSlot = Dictionary(uniqueKeysWithValues: Self.attributes(of: slot, in: searched))
            for item in found.items where Self.isCredential(item, in: searched) && item.objectPath != createdPath {
                var itemSlot = item.attributes
                itemSlot["xdg:schema"] = nil
                if itemSlot == exactSlot { try connection.delete(item, while: "replacing the previous credential") }
            }
        }
    }

    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        let comparePassword = query.password != nil || query.credential != nil
        var count = 0
        for layout in Layout.searched(by: query) {
            let found = try search(query, layout: layout, loadSecrets: comparePassword, while: "erasing a credential")
            var doomed: [FoundItem] = []
            for item in found.items where Self.isCredential(item, in: layout) {
                if item.isLocked { throw connection.lockedError() }
                guard let credential = Self.credential(from: item, in: layout, loadingSecret: comparePassword) else {
                    try connection.ensureItemIsGone(item)
                    continue
                }
                if query.matches(credential) { doomed.append(item) }
            }
            for item in doomed { try connection.delete(item, while: "erasing a credential") }
            count += doomed.count
        }
        return count
    }

    private func search(
        _ query: CredentialQuery, layout: Layout, loadSecrets: Bool,
        while operation: String
    ) throws(StoreError) -> ItemList {
        try connection.search(Self.attributes(of: query, in: layout), loadSecrets: loadSecrets, while: operation)
    }

    static func attributes(of query: CredentialQuery, in layout: Layout = .git) -> [(String, String)] {
        var attributes: [(String, String)] = []
        if let username = query.username { attributes.append(("user", username)) }
        if let protocolName = query.protocolName { attributes.append((layout.protocolAttribute, protocolName)) }
        if let host = query.host {
            attributes.append(("server", host.server))
            if let port = host.port { attributes.append(("port", String(port))) }
        }
        if let path = query.path { attributes.append(("object", path)) }
        return attributes
    }

    /// Only items that git's helpers (or portal-token) wrote: other applications' items that
    /// happen to share an attribute name are never returned or erased.
    private static func isCredential(_ item: FoundItem, in layout: Layout) -> Bool {
        switch layout {
        case .git:
            return (item.schemaName == schemaName || item.schemaName == legacySchemaName)
                && item.attributes["protocol"] != nil
        case .bearerOnly:
            return item.schemaName == bearerOnlySchemaName && item.attributes[bearerOnlyProtocolAttribute] != nil
        }
    }

    /// The item as a credential; nil when its secret was wanted but not loaded (locked).
    private static func credential(from item: FoundItem, in layout: Layout, loadingSecret: Bool) -> Credential? {
        let attributes = item.attributes
        let host = attributes["server"].map { server in
            CredentialHost(server: server, port: attributes["port"].flatMap { Int($0) }.flatMap { $0 == 0 ? nil : $0 })
        }
        var credential = Credential(
            protocolName: attributes[layout.protocolAttribute] ?? "", host: host,
            path: attributes["object"], username: attributes["user"] ?? "", password: Secret(""))
        guard loadingSecret else { return credential }
        guard let packed = item.secret else { return nil }
        SecretPacking.unpack(packed).apply(to: &credential)
        return credential
    }
}
