import PortalTokenCore

// The credential protocol's three operations on a parsed request, for `get`, `store` and `erase`
// and for the agent's `POST /v1/git/get`, `/store` and `/erase`. A request for a Portal origin
// concerns the Portal session (docs/sessions.md, "Portal origins in the credential protocol");
// any other, the credential store.

/// The credential store's side of the protocol, on the backend in use.
private func helper(_ context: Context) throws -> CredentialHelper {
    CredentialHelper(store: try context.credentials(), now: context.now)
}

/// git's `get`.
package enum CredentialGet {
    /// The answer's lines, nil when nothing matches.
    package static func run(_ request: CredentialRequest, _ context: Context) throws -> [UInt8]? {
        let answer: CredentialProtocol.Answer?
        if try context.isPortalOrigin(request) {
            answer = try portalAnswer(for: request, context)
        } else {
            context.audit?.concernsPortalSession = false
            let helper = try helper(context)
            answer = try helper.get(request).map { helper.answer($0, to: request) }
        }
        guard let answer else {
            context.audit?.outcome = .notFound
            return nil
        }
        return try CredentialProtocol.format(answer)
    }

    /// A Portal origin is answered from the session (docs/sessions.md, "Portal origins in the credential protocol"): to
    /// a client that advertises `capability[]=authtype`, the token as an ephemeral Bearer credential; to any
    /// other, username is the end user and password the token. password_expiry_utc is the
    /// sliding expiry either way. Not signed in reads as "no credential", as git expects of a
    /// helper.
    private static func portalAnswer(for request: CredentialRequest, _ context: Context) throws
        -> CredentialProtocol.Answer?
    {
        // A username in the request (`credential.<url>.username`) names which end user's session.
        let username = request.username.flatMap { $0.isEmpty ? nil : $0 }
        let session: PortalSession
        do {
            session = try context.sessionService(endUserID: username).usableSession()
        } catch SessionError.notSignedIn {
            return nil
        }
        if let username, username != session.endUserID { return nil }
        var answer = CredentialProtocol.Answer(
            credential: Credential(
                protocolName: request.protocolName ?? "https", host: request.host, username: session.endUserID,
                password: session.token, passwordExpiresAt: session.expiresAt,
                authType: "Bearer", credential: session.token))
        if request.advertisesAuthType {
            answer.authType = true
            answer.ephemeral = true
            answer.omitPassword = true
        }
        return answer
    }
}

/// git's `store`, which is `approve` for a Portal origin.
package enum CredentialStore {
    package static func run(_ request: CredentialRequest, _ context: Context) throws {
        guard try context.isPortalOrigin(request) else {
            context.audit?.concernsPortalSession = false
            try helper(context).store(request)
            return
        }
        // git's "approve" for a Portal origin: the same token slides the expiry (ephemeral or
        // not); a new token (minted by the user's own backend) becomes the session, unless it
        // is marked ephemeral, which is never stored. The token is the password, or git
        // 2.46+'s `credential`.
        guard let token = request.passwordOrCredential, !token.isEmpty else { return }
        let endUserID = request.username?.trimmingWhitespace ?? ""
        // The end user named is the session approved (a second end user's is kept beside the first).
        let sessions = try context.sessionService(endUserID: endUserID.isEmpty ? nil : endUserID)
        if !endUserID.isEmpty, !request.isEphemeral {
            try sessions.approve(token: token, endUserID: endUserID)
            if let session = try sessions.restore(), session.token == token { context.rememberAccount(session) }
            return
        }
        if let session = try sessions.restore(), session.token == token {
            return try sessions.approve(token: token, endUserID: session.endUserID)
        }
        if request.isEphemeral { return }
        throw CLIError.usage(
            "a Portal session needs its end user ID as the username",
            hint: "give username=<endUserId> with the token")
    }
}

/// git's `erase`, which is `reject` for a Portal origin.
package enum CredentialErase {
    package static func run(_ request: CredentialRequest, _ context: Context) throws {
        guard try context.isPortalOrigin(request) else {
            context.audit?.concernsPortalSession = false
            if try helper(context).erase(request) == 0 { context.audit?.outcome = .notFound }
            return
        }
        let username = request.username.flatMap { $0.isEmpty ? nil : $0 }
        let sessions = try context.sessionService(endUserID: username)
        if let token = request.passwordOrCredential {
            // git sends the password (or git 2.46+'s credential) it just saw rejected: the
            // session ended (hook, exit 3). Another value is an older token, and changes nothing.
            if let ended = try sessions.invalidate(token: token) {
                context.audit?.outcome = .invalidated
                throw SessionError.ended(reason: .unauthorized, endUserID: ended.endUserID)
            }
            context.audit?.outcome = .notFound
        } else if try !sessions.remove() {
            context.audit?.outcome = .notFound
        }
    }
}
