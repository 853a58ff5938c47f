/// The credential-protocol operations on any store, as gitcredentials(7) defines them.
///
/// Decisions that git 2.39 leaves to the helper live here, so every backend makes them alike:
/// an expired `password_expiry_utc` is never handed out, and an empty erase pattern removes
/// nothing.
public struct CredentialHelper {
    public let store: any CredentialStore
    /// The current Unix time in seconds.
    public let now: () -> Int64

    public init(store: any CredentialStore, now: @escaping () -> Int64) {
        self.store = store
        self.now = now
    }

    /// The most recently stored credential that matches and has not expired.
    public func get(_ request: CredentialRequest) throws(StoreError) -> Credential? {
        // Without a protocol and a host or path there is no origin to answer for.
        guard request.protocolName != nil, request.host != nil || request.path != nil else { return nil }
        let time = now()
        return try store.lookup(request.query).first { !$0.isExpired(at: time) }
    }

    /// Stores the credential; a request lacking protocol, origin, username or password is
    /// not a credential and is ignored, as git-credential-libsecret does.
    @discardableResult
    public func store(_ request: CredentialRequest) throws(StoreError) -> Bool {
        guard let protocolName = request.protocolName, request.host != nil || request.path != nil,
              let username = request.username, let password = request.password else { return false }
        try store.store(Credential(
            protocolName: protocolName, host: request.host, path: request.path, username: username,
            password: password, passwordExpiresAt: request.passwordExpiresAt,
            oauthRefreshToken: request.oauthRefreshToken))
        return true
    }

    /// Removes every match; with a password in the request, only entries holding it.
    @discardableResult
    public func erase(_ request: CredentialRequest) throws(StoreError) -> Int {
        var query = request.query
        guard !query.isEmptyPattern else { return 0 }
        query.password = request.password
        return try store.erase(query)
    }
}
