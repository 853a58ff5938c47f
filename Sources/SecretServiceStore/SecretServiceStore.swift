import CLibSecret
import PortalTokenCore

/// git credentials in the freedesktop Secret Service, laid out exactly as git-credential-libsecret
/// lays them out (product contract §6), so that either helper reads what the other wrote.
public final class SecretServiceStore: CredentialStore {
    /// git 2.45 and later store under this schema name.
    public static let schemaName = "org.git.Password"
    /// git 2.39 (Debian 12) stores under libsecret's compatibility schema.
    public static let legacySchemaName = "org.gnome.keyring.NetworkPassword"

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

    nonisolated(unsafe) private static let schema = makeSchema(name: schemaName, attributes: [
        ("user", SECRET_SCHEMA_ATTRIBUTE_STRING), ("object", SECRET_SCHEMA_ATTRIBUTE_STRING),
        ("protocol", SECRET_SCHEMA_ATTRIBUTE_STRING), ("port", SECRET_SCHEMA_ATTRIBUTE_INTEGER),
        ("server", SECRET_SCHEMA_ATTRIBUTE_STRING),
    ])

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        let found = try search(query, loadSecrets: true, while: "looking up a credential")
        var matches: [(credential: Credential, order: ItemOrder)] = []
        for item in found.items where Self.isGitCredential(item) {
            // The item is there but its secret is not: a locked collection must never read as
            // "nothing stored"; an item deleted since the search is simply gone.
            guard let credential = Self.credential(from: item, loadingSecret: true) else {
                try connection.ensureItemIsGone(item)
                continue
            }
            if query.matches(credential) { matches.append((credential, item.order)) }
        }
        if matches.isEmpty { try connection.ensureDefaultCollectionIsNotLocked() }
        return matches.sorted { $0.order > $1.order }.map(\.credential)
    }

    public func store(_ credential: Credential) throws(StoreError) {
        let collection = try connection.unlockedDefaultCollection()
        // Items of the same slot, from either schema. gnome-keyring's own "replace" matches on a
        // subset of attributes and would overwrite a credential that has a port or path, so the
        // slot is matched here, exactly, and old items go only after the new one is safe.
        let slot = CredentialQuery(protocolName: credential.protocolName, host: credential.host,
                                   path: credential.path, username: credential.username)
        let existing = try search(slot, loadSecrets: false, while: "storing a credential")
        let packed = SecretPacking.pack(password: credential.password, passwordExpiresAt: credential.passwordExpiresAt,
                                        oauthRefreshToken: credential.oauthRefreshToken)
        let attributes = Self.attributes(of: slot)
        let createdPath = try connection.create(in: collection, schema: Self.schema, attributes: attributes,
                                                label: credential.keyringLabel, secret: packed, while: "storing a credential")
        let exactSlot = Dictionary(uniqueKeysWithValues: attributes)
        for item in existing.items where Self.isGitCredential(item) && item.objectPath != createdPath {
            var itemSlot = item.attributes
            itemSlot["xdg:schema"] = nil
            if itemSlot == exactSlot { try connection.delete(item, while: "replacing the previous credential") }
        }
    }

    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        let comparePassword = query.password != nil
        let found = try search(query, loadSecrets: comparePassword, while: "erasing a credential")
        var doomed: [FoundItem] = []
        for item in found.items where Self.isGitCredential(item) {
            if item.isLocked { throw connection.lockedError() }
            guard let credential = Self.credential(from: item, loadingSecret: comparePassword) else {
                try connection.ensureItemIsGone(item)
                continue
            }
            if query.matches(credential) { doomed.append(item) }
        }
        for item in doomed { try connection.delete(item, while: "erasing a credential") }
        return doomed.count
    }

    private func search(_ query: CredentialQuery, loadSecrets: Bool, while operation: String) throws(StoreError) -> ItemList {
        try connection.search(Self.attributes(of: query), loadSecrets: loadSecrets, while: operation)
    }

    static func attributes(of query: CredentialQuery) -> [(String, String)] {
        var attributes: [(String, String)] = []
        if let username = query.username { attributes.append(("user", username)) }
        if let protocolName = query.protocolName { attributes.append(("protocol", protocolName)) }
        if let host = query.host {
            attributes.append(("server", host.server))
            if let port = host.port { attributes.append(("port", String(port))) }
        }
        if let path = query.path { attributes.append(("object", path)) }
        return attributes
    }

    /// Only items that git's helpers (or portal-token) wrote: other applications' items that
    /// happen to share an attribute name are never returned or erased.
    private static func isGitCredential(_ item: FoundItem) -> Bool {
        (item.schemaName == schemaName || item.schemaName == legacySchemaName) && item.attributes["protocol"] != nil
    }

    /// The item as a credential; nil when its secret was wanted but not loaded (locked).
    private static func credential(from item: FoundItem, loadingSecret: Bool) -> Credential? {
        let attributes = item.attributes
        let host = attributes["server"].map { server in
            CredentialHost(server: server, port: attributes["port"].flatMap { Int($0) }.flatMap { $0 == 0 ? nil : $0 })
        }
        var credential = Credential(protocolName: attributes["protocol"] ?? "", host: host, path: attributes["object"],
                                    username: attributes["user"] ?? "", password: Secret(""))
        guard loadingSecret else { return credential }
        guard let packed = item.secret else { return nil }
        let unpacked = SecretPacking.unpack(packed)
        credential.password = unpacked.password
        credential.passwordExpiresAt = unpacked.passwordExpiresAt
        credential.oauthRefreshToken = unpacked.oauthRefreshToken
        return credential
    }
}
