/// The credential-protocol operations on any store, as gitcredentials(7) defines them.
///
/// Decisions that git leaves to the helper live here, so every backend makes them alike:
/// an expired `password_expiry_utc` is never handed out, an empty erase pattern removes
/// nothing, an `ephemeral` credential is never stored, and `authtype`/`credential` are kept and
/// handed out only for clients that advertise `capability[]=authtype` (git 2.46+).
public struct CredentialHelper {
    public let store: CredentialItems
    /// The current Unix time in seconds.
    public let now: () -> Int64

    public init(store: CredentialItems, now: @escaping () -> Int64) {
        self.store = store
        self.now = now
    }

    /// The most recently stored credential that matches and has not expired, as the client may
    /// see it: without `authtype`/`credential` unless the request advertised the capability.
    /// With `exactPath`, only the credential of the request's own path (none: no path) matches.
    public func get(_ request: CredentialRequest, exactPath: Bool = false) throws(StoreError) -> Credential? {
        // Without a protocol and a host or path there is no origin to answer for.
        guard request.protocolName != nil, request.host != nil || request.path != nil else { return nil }
        let time = now()
        var query = request.query
        query.pathIsExact = exactPath
        let found = try store.lookup(query).first { !$0.isExpired(at: time) }
        return request.advertisesAuthType ? found : found?.withoutAuthTypeCredential
    }

    /// The `get` answer for `credential`, with the capabilities the request advertised.
    public func answer(_ credential: Credential, to request: CredentialRequest) -> CredentialProtocol.Answer {
        var answer = CredentialProtocol.Answer(credential: credential)
        answer.authType = request.advertisesAuthType
        if request.advertisesState { answer.state = [CredentialState.served] }
        return answer
    }

    /// Stores the credential. A request lacking protocol or origin, or holding neither a
    /// username and password nor (with the capability) an `authtype` and `credential`, is not a
    /// credential and is ignored, as git-credential-libsecret does; so is an `ephemeral` one.
    /// A request carrying portal-token's own "served" state is the credential a `get` just
    /// handed out: when the store still holds exactly that, nothing is written.
    @discardableResult
    public func store(_ request: CredentialRequest) throws(StoreError) -> Bool {
        guard let credential = Self.credential(in: request) else { return false }
        if request.state.contains(CredentialState.served) {
            var slot = CredentialQuery(
                protocolName: credential.protocolName, host: credential.host,
                path: credential.path, username: credential.username)
            slot.includesBearerOnly = true
            let stored = try store.lookup(slot).first { $0.occupiesSameSlot(as: credential) }
            // What that get handed out: without the authtype pair to a client lacking the capability.
            let served = request.advertisesAuthType ? stored : stored?.withoutAuthTypeCredential
            if let served, served == credential { return false }
        }
        try store.store(credential)
        return true
    }

    /// The credential a `store` request describes, or nil when there is nothing to keep.
    static func credential(in request: CredentialRequest) -> Credential? {
        guard !request.isEphemeral, let protocolName = request.protocolName,
            request.host != nil || request.path != nil
        else { return nil }
        var authType: String?, value: Secret?
        if request.advertisesAuthType, let type = request.authType, !type.isEmpty,
            let credential = request.credential, !credential.isEmpty
        {
            authType = type
            value = credential
        }
        let password = request.password ?? Secret("")
        if authType == nil {
            // A password-only credential, as before git 2.46: username and password are needed.
            guard request.username != nil, request.password != nil else { return nil }
        }
        return Credential(
            protocolName: protocolName, host: request.host, path: request.path,
            username: request.username ?? "", password: password,
            passwordExpiresAt: request.passwordExpiresAt, oauthRefreshToken: request.oauthRefreshToken,
            authType: authType, credential: value)
    }

    /// Removes the one credential `get` answers for the request, and nothing else that the
    /// request's pattern would match; returns how many items held it (0: `get` answers nothing).
    @discardableResult
    public func eraseAnswer(to request: CredentialRequest, exactPath: Bool = false) throws(StoreError) -> Int {
        guard let answered = try get(request, exactPath: exactPath) else { return 0 }
        return try store.erase(exactly: answered)
    }

    /// Removes every match; with a password (or `credential`) in the request, only entries
    /// holding it.
    @discardableResult
    public func erase(_ request: CredentialRequest) throws(StoreError) -> Int {
        var query = request.query
        guard !query.isEmptyPattern else { return 0 }
        query.includesBearerOnly = true
        query.password = request.password
        query.credential = request.credential
        return try store.erase(query)
    }
}
