/// git credentials as items, laid out exactly as git-credential-libsecret lays them out, so that
/// either helper reads what the other wrote, in the keyring and in the file alike
/// (docs/storage.md, "Secret Service: git credentials").
///
/// - git 2.45 and later store under `org.git.Password`, git 2.39 under libsecret's compatibility
///   schema `org.gnome.keyring.NetworkPassword`; both are read, new items use the first.
/// - Attributes: `protocol`, `server`, `port` (when given), `object` (the path), `user`; the
///   label is `Git: <protocol>://<host>/<path>`; the secret is packed by `SecretPacking`.
/// - A credential git's helper cannot represent (an `authtype`/`credential` pair with no
///   password, git 2.46+) is kept under `io.portalhq.PortalToken.Credential`, with its protocol
///   in `credential-protocol` instead of `protocol`. git's helper searches by `protocol`, so it
///   never finds such an item: it is neither handed to git as an empty password nor overwritten
///   by git's own items.
public struct CredentialItems {
    public static let schema = "org.git.Password"
    public static let legacySchema = "org.gnome.keyring.NetworkPassword"
    public static let bearerOnlySchema = "io.portalhq.PortalToken.Credential"
    static let bearerOnlyProtocolAttribute = "credential-protocol"

    public let items: any ItemStore

    public init(_ items: any ItemStore) { self.items = items }

    /// The two layouts an item may use.
    enum Layout: CaseIterable {
        case git, bearerOnly

        init(of credential: Credential) { self = credential.isBearerOnly ? .bearerOnly : .git }

        var schemas: [String] {
            self == .git ? [CredentialItems.schema, CredentialItems.legacySchema] : [CredentialItems.bearerOnlySchema]
        }

        var protocolAttribute: String { self == .git ? "protocol" : CredentialItems.bearerOnlyProtocolAttribute }

        /// The layouts a query searches: bearer-only items only when it includes them.
        static func searched(by query: CredentialQuery) -> [Layout] {
            query.includesBearerOnly ? [.git, .bearerOnly] : [.git]
        }
    }

    /// Every stored credential the query matches (its password, if any, is ignored), most
    /// recently stored first.
    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        var query = query
        query.password = nil
        return try items.search(Self.filters(for: query)).compactMap(Self.credential(from:)).filter(query.matches)
    }

    /// Every stored credential, most recently stored first.
    public func all() throws(StoreError) -> [Credential] { try lookup(CredentialQuery()) }

    /// Stores `credential`, replacing the one in the same slot (protocol, host, path, username)
    /// in either layout. The slot is matched exactly: a credential without a port or path is
    /// another slot than one with them.
    public func store(_ credential: Credential) throws(StoreError) {
        let slot = CredentialQuery(
            protocolName: credential.protocolName, host: credential.host, path: credential.path,
            username: credential.username)
        try items.replace(
            Self.filters(for: slot),
            where: { Self.credential(from: $0).map(credential.occupiesSameSlot(as:)) ?? false },
            with: Self.item(for: credential))
    }

    /// Removes every credential the query matches, its password (or `credential`) included when
    /// given. Returns how many were removed.
    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        try items.delete(Self.filters(for: query)) { Self.credential(from: $0).map(query.matches) ?? false }
    }

    /// Removes the items that keep `credential`, as a lookup returned it: its slot exactly (no
    /// other path or user, and no path is not any path), and only an item holding its password,
    /// with or without an `authtype`/`credential` pair beside it. Returns how many were removed.
    @discardableResult
    public func erase(exactly credential: Credential) throws(StoreError) -> Int {
        let slot = CredentialQuery(
            protocolName: credential.protocolName, host: credential.host, path: credential.path,
            username: credential.username)
        return try items.delete(Self.filters(for: slot)) { item in
            guard let stored = Self.credential(from: item), stored.occupiesSameSlot(as: credential) else {
                return false
            }
            return stored.password == credential.password && stored.isBearerOnly == credential.isBearerOnly
        }
    }

    // MARK: The codec

    /// The filters that find a query's candidates in every layout and schema it searches.
    static func filters(for query: CredentialQuery) -> [ItemAttributes] {
        Layout.searched(by: query).flatMap { layout in
            layout.schemas.map { schema in
                var filter = attributes(of: query, in: layout)
                filter[StoredItem.schemaAttribute] = schema
                return filter
            }
        }
    }

    static func attributes(of query: CredentialQuery, in layout: Layout) -> ItemAttributes {
        var attributes: ItemAttributes = [:]
        if let username = query.username { attributes["user"] = username }
        if let protocolName = query.protocolName { attributes[layout.protocolAttribute] = protocolName }
        if let host = query.host {
            attributes["server"] = host.server
            if let port = host.port { attributes["port"] = String(port) }
        }
        // An exact empty path is the absence of the attribute, which no filter can ask for.
        if let path = query.path, !(query.pathIsExact && path.isEmpty) { attributes["object"] = path }
        return attributes
    }

    /// The item that keeps `credential`.
    public static func item(for credential: Credential) -> StoredItem {
        let layout = Layout(of: credential)
        var attributes = attributes(
            of: CredentialQuery(
                protocolName: credential.protocolName, host: credential.host, path: credential.path,
                username: credential.username),
            in: layout)
        attributes[StoredItem.schemaAttribute] = layout.schemas[0]
        return StoredItem(
            attributes: attributes, label: credential.keyringLabel, secret: SecretPacking.pack(credential))
    }

    /// The credential an item keeps; nil for an item of another kind. Only items that git's
    /// helpers or portal-token wrote count: other applications' items that happen to share an
    /// attribute name are never returned or erased.
    public static func credential(from item: StoredItem) -> Credential? {
        let layout: Layout
        switch item.schema {
        case schema, legacySchema: layout = .git
        case bearerOnlySchema: layout = .bearerOnly
        default: return nil
        }
        let attributes = item.attributes
        guard let protocolName = attributes[layout.protocolAttribute] else { return nil }
        let host = attributes["server"].map { server in
            CredentialHost(server: server, port: attributes["port"].flatMap { Int($0) }.flatMap { $0 == 0 ? nil : $0 })
        }
        var credential = Credential(
            protocolName: protocolName, host: host, path: attributes["object"], username: attributes["user"] ?? "",
            password: Secret(""))
        SecretPacking.unpack(item.secret).apply(to: &credential)
        return credential
    }
}
