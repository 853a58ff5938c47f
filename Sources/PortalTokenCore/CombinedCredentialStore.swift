/// The keyring first, then the encrypted file: what `auto` uses when the Secret Service answers
/// and a file store exists (product contract §6, "lookups in auto also consult the file store").
///
/// Credentials stored while no keyring was reachable stay in the file; lookups still find
/// them. New credentials go to the keyring only. The file is opened only when the keyring has
/// no usable match, so a keyring user never pays for, or is asked for, the file's passphrase
/// on a hit.
public struct CombinedCredentialStore: CredentialStore {
    public let primary: any CredentialStore
    public let secondary: any CredentialStore
    /// The current Unix time in seconds: an expired keyring entry does not hide the file's.
    public let now: () -> Int64

    public init(primary: any CredentialStore, secondary: any CredentialStore, now: @escaping () -> Int64) {
        self.primary = primary
        self.secondary = secondary
        self.now = now
    }

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        let found = try primary.lookup(query)
        let time = now()
        if found.contains(where: { !$0.isExpired(at: time) }) { return found }
        return found + (try secondary.lookup(query))
    }

    public func store(_ credential: Credential) throws(StoreError) {
        try primary.store(credential)
    }

    /// Erases from both: a credential git was handed from the file and then rejected must not
    /// be handed out again.
    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        try primary.erase(query) + secondary.erase(query)
    }
}

/// The keyring first, then the encrypted file, for Portal sessions: a session saved while no
/// keyring was reachable is still found in `auto`. New sessions go to the keyring; a deletion
/// (logout, invalidation) removes the session from both, so an ended session never comes back
/// from the file.
public struct CombinedSessionStore: SessionStore {
    public let primary: any SessionStore
    public let secondary: any SessionStore

    public init(primary: any SessionStore, secondary: any SessionStore) {
        self.primary = primary
        self.secondary = secondary
    }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        let found = try primary.loadSession(authEnvironmentID: authEnvironmentID)
        guard found == .absent else { return found }
        return try secondary.loadSession(authEnvironmentID: authEnvironmentID)
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        try primary.saveSession(session)
    }

    @discardableResult
    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        let fromPrimary = try primary.deleteSession(authEnvironmentID: authEnvironmentID)
        let fromSecondary = try secondary.deleteSession(authEnvironmentID: authEnvironmentID)
        return fromPrimary || fromSecondary
    }
}
