/// Why a Portal-session operation did not give the caller a live session or a response.
public enum SessionError: Error, Sendable, Equatable {
    /// No usable session is stored for the environment (exit 1).
    case notSignedIn(authEnvironmentID: String)
    /// The session ended just now: Portal answered 401, or the 7-day cap passed (exit 3).
    case ended(reason: SessionEndReason, endUserID: String)
    /// Portal could not be reached (exit 5); the session is kept.
    case network(HTTPError)
    /// Portal answered the expiry check with something other than success or 401 (exit 5): it
    /// could not confirm the session, which is kept.
    case checkFailed(status: Int)
    /// The request named an origin other than the configured API (exit 2).
    case foreignOrigin

    public var message: String {
        switch self {
        case .notSignedIn(let environment):
            return "not signed in to Portal environment '\(environment)'"
        case .ended(.unauthorized, let endUserID):
            return "the Portal session of \(endUserID) has ended: Portal no longer accepts it"
        case .ended(.expired, let endUserID):
            return "the Portal session of \(endUserID) has ended: it reached its 7-day limit"
        case .network(let error):
            return error.message
        case .checkFailed(let status):
            return "Portal answered HTTP \(status) when asked whether the session is still valid; the session is kept"
        case .foreignOrigin:
            return "portal-token sends the session token to the configured API host only"
        }
    }

    public var hint: String? {
        switch self {
        case .notSignedIn, .ended:
            return "sign in with 'portal-token login'"
        case .network(let error):
            return error.hint ?? "check the network and PORTAL_API_HOST, then try again"
        case .checkFailed:
            return "try again later"
        case .foreignOrigin:
            return "give a path such as /api/v3/clients/me, or a URL on the configured API host"
        }
    }
}

/// Serialises changes to the stored session across processes, so that a compare-and-delete
/// sees no write in between and the hook runs for one process only.
public protocol SessionLock {
    func withLock<Result>(_ body: () throws -> Result) throws -> Result
}

/// The life of one auth environment's Portal session (docs/sessions.md, "When Portal is asked"): handing the token
/// out while it is known to be live, asking Portal once when it may not be, sliding the expiry on
/// every accepted request, and ending the session (compare-and-delete, then the hook, by one
/// process only) on a 401 or at the 7-day cap.
public final class SessionService {
    public static let validationPath = "/api/v3/clients/me"

    public let authEnvironmentID: String
    /// The end user whose session this is, when the environment has several; nil for the
    /// environment's newest.
    public let endUserID: String?
    public let apiBase: PortalAPIBase
    private let store: Sessions
    private let lock: any SessionLock
    private let transport: any HTTPTransport
    private let requests: PortalRequestBuilder
    /// Runs the on-session-invalidated hook; called by the one process that removed the session.
    private let sessionEnded: (SessionEndedEvent) -> Void
    /// One line for stderr, for things the user should know that are not errors.
    private let warn: (String) -> Void
    private let now: () -> Int64

    public init(
        authEnvironmentID: String, endUserID: String? = nil, apiBase: PortalAPIBase, store: Sessions,
        lock: any SessionLock,
        transport: any HTTPTransport, requests: PortalRequestBuilder,
        sessionEnded: @escaping (SessionEndedEvent) -> Void, warn: @escaping (String) -> Void,
        now: @escaping () -> Int64
    ) {
        self.authEnvironmentID = authEnvironmentID
        self.endUserID = endUserID
        self.apiBase = apiBase
        self.store = store
        self.lock = lock
        self.transport = transport
        self.requests = requests
        self.sessionEnded = sessionEnded
        self.warn = warn
        self.now = now
    }

    // MARK: Reading

    /// The stored session, without any network call (docs/portal-api.md, "The session payload"): nil when none is
    /// stored; an unreadable record is removed, with a warning that never shows it. A store
    /// failure is thrown and nothing is deleted.
    public func restore() throws -> PortalSession? {
        switch try store.loadSession(authEnvironmentID: authEnvironmentID, endUserID: endUserID) {
        case .absent:
            return nil
        case .present(let session):
            return session
        case .unreadable:
            let removed = try lock.withLock { () throws -> Bool in
                // Checked again under the lock: a sign-in may have replaced it meanwhile.
                guard try store.loadSession(authEnvironmentID: authEnvironmentID, endUserID: endUserID) == .unreadable
                else { return false }
                return try store.deleteSession(authEnvironmentID: authEnvironmentID, endUserID: endUserID)
            }
            if removed {
                warn(
                    "the stored Portal session for environment '\(authEnvironmentID)' could not be read and was removed"
                )
                return nil
            }
            return try restore()
        }
    }

    /// A session whose token may be handed out now: without a network call before `expiresAt`;
    /// after it, once Portal has accepted the token; never past the 7-day cap.
    public func usableSession() throws -> PortalSession {
        guard let session = try restore() else { throw SessionError.notSignedIn(authEnvironmentID: authEnvironmentID) }
        switch session.decision(at: now()) {
        case .handOut:
            return session
        case .expired:
            try end(session, reason: .expired)
        case .checkWithPortal:
            let response = try send(session, "GET", Self.validationPath, body: nil)
            guard response.isSuccess else { throw SessionError.checkFailed(status: response.status) }
            return try slide(session)
        }
    }

    // MARK: Requests with the session

    /// One authenticated `GET /api/v3/clients/me`; on success the expiry slides.
    public func refresh() throws -> (session: PortalSession, response: HTTPResponse) {
        let session = try liveOrChecked()
        let response = try send(session, "GET", Self.validationPath, body: nil)
        return (response.isSuccess ? try slide(session) : session, response)
    }

    /// An authenticated request to the configured API host (`path` is a path, or a URL on that
    /// host); the expiry slides on 2xx. The response comes back whatever its status, but a 401
    /// ends the session first.
    public func api(method: String, path: String, body: [UInt8]?, headers: [HTTPHeader] = []) throws -> HTTPResponse {
        let session = try liveOrChecked()
        let response = try send(session, method, path, body: body, headers: headers)
        if response.isSuccess { _ = try slide(session) }
        return response
    }

    /// The session a request the caller sends itself goes with (the proxy's, whose bodies are
    /// streamed): any stored one within its cap, as for `api`; the request itself is the check.
    /// Its answer goes to `settle`.
    public func sessionToSend() throws -> PortalSession { try liveOrChecked() }

    /// Whether a URL may receive the session's bearer (docs/portal-api.md, "Portal hosts").
    public func allowsBearer(_ url: String) -> Bool { requests.gate.allowsBearer(url) }

    /// What the answer to a request that carried `session`'s token means for the session, as for
    /// `api` (docs/sessions.md, "Sliding expiry"): a 401 from Portal ends it (the hook runs in
    /// the one process that removed it, and this throws `ended`); a 2xx slides the expiry.
    public func settle(_ session: PortalSession, status: Int, answeredBy url: String) throws {
        try endIfRejected(session, status: status, answeredBy: url, carriedToken: true)
        if (200..<300).contains(status) { _ = try slide(session) }
    }

    /// The session to send with: any stored one within its cap (the request itself is the check).
    private func liveOrChecked() throws -> PortalSession {
        guard let session = try restore() else { throw SessionError.notSignedIn(authEnvironmentID: authEnvironmentID) }
        if session.decision(at: now()) == .expired { try end(session, reason: .expired) }
        return session
    }

    private func send(
        _ session: PortalSession, _ method: String, _ path: String, body: [UInt8]?,
        headers: [HTTPHeader] = []
    ) throws -> HTTPResponse {
        let url = try resolve(path)
        let request = requests.request(method, url, body: body, bearer: session.token, extraHeaders: headers)
        let response: HTTPResponse
        do {
            response = try transport.send(request)
        } catch {
            throw SessionError.network(error)
        }
        // A 401 ends the session only when this request carried the token to Portal
        // (docs/portal-api.md, "When a 401 ends a session"): the answering URL must be Portal's.
        let answeredBy = response.effectiveURL.isEmpty ? url : response.effectiveURL
        try endIfRejected(
            session, status: response.status, answeredBy: answeredBy, carriedToken: request.authorization != nil)
        return response
    }

    /// Ends the session on a 401 that Portal gave a request carrying its token.
    private func endIfRejected(_ session: PortalSession, status: Int, answeredBy: String, carriedToken: Bool) throws {
        if status == 401, carriedToken, requests.gate.isPortalOwned(answeredBy) {
            try end(session, reason: .unauthorized)
        }
    }

    /// The URL for a path, or an absolute URL on the configured API's origin; anything else is
    /// refused before a request is built.
    public func resolve(_ path: String) throws -> String {
        guard let url = apiBase.resolve(path) else { throw SessionError.foreignOrigin }
        return url
    }

    // MARK: Changes

    /// Stores a token minted elsewhere (git's `store` with a new token, or a sign-in) as the
    /// environment's session, issued now.
    @discardableResult
    public func adopt(token: Secret, endUserID: String) throws -> PortalSession {
        let time = now()
        let session = PortalSession(
            token: token, endUserID: endUserID, authEnvironmentID: authEnvironmentID,
            issuedAt: time, lastActivityAt: time)
        try store.saveSession(session)
        return session
    }

    /// What Portal said of a token offered for adoption.
    public enum AdoptionOutcome: Sendable, Equatable {
        case adopted(PortalSession)
        /// Portal refused the token (its HTTP status); nothing was stored.
        case refused(status: Int)
        /// Portal accepted the token but named no client `id`, and no end user was given.
        case noEndUser
    }

    /// `login --with-token`: one `GET /api/v3/clients/me` with `token` decides whether it is
    /// adopted. The end user is `endUserID`, else the `id` Portal returns (docs/portal-api.md, "The session token's
    /// life"). A refusal never touches the stored session: that request did not carry its token.
    public func adoptChecked(token: Secret, endUserID: String?) throws -> AdoptionOutcome {
        let request = requests.request("GET", apiBase.url(path: Self.validationPath), body: nil, bearer: token)
        let response: HTTPResponse
        do {
            response = try transport.send(request)
        } catch {
            throw SessionError.network(error)
        }
        guard response.isSuccess else { return .refused(status: response.status) }
        let returnedID = (try? JSONValue.parse(response.body))?["id"]?.stringValue
        guard let endUser = endUserID ?? returnedID, !endUser.isEmpty else { return .noEndUser }
        return .adopted(try adopt(token: token, endUserID: endUser))
    }

    /// git's "approve": the token worked for a request just now. The same token slides the
    /// expiry; another token is adopted as the session.
    public func approve(token: Secret, endUserID: String) throws {
        if let session = try restore(), session.token == token {
            _ = try slide(session)
        } else {
            try adopt(token: token, endUserID: endUserID)
        }
    }

    /// Activity closer than this to the recorded activity is not written again: a script loop
    /// calling `api` would otherwise pay a keyring write per call. The recorded expiry can then
    /// trail Portal's by up to this much, which only makes portal-token ask Portal a little early.
    public static let activityRecordingInterval: Int64 = 60

    /// Records that Portal accepted `session`'s token now, unless a newer session was stored
    /// meanwhile.
    private func slide(_ session: PortalSession) throws -> PortalSession {
        let slid = session.accepted(at: now())
        if let recorded = session.lastActivityAt, session.issuedAt != nil,
            slid.lastActivityAt! - recorded < Self.activityRecordingInterval
        {
            return slid
        }
        // The check that the stored session still holds this token and the write are one step
        // of the store, so a session another host removed meanwhile (a 401 there) stays removed.
        try lock.withLock { _ = try store.slide(slid, holding: session.token) }
        return slid
    }

    /// Ends the session that holds `token` (git's erase with the matching password): removed,
    /// the hook run by the process that removed it. Returns the ended session, or nil when no
    /// stored session holds the token.
    public func invalidate(token: Secret) throws -> PortalSession? {
        guard let session = try restore(), session.token == token else { return nil }
        do {
            try end(session, reason: .unauthorized)
        } catch SessionError.ended {
            return session
        }
    }

    /// Compare-and-delete under the lock, so a newer session stored meanwhile survives; then the
    /// hook, run only by the process whose delete removed the session; then the `ended` error.
    private func end(_ session: PortalSession, reason: SessionEndReason) throws -> Never {
        let removed = try store.deleteSession(
            authEnvironmentID: authEnvironmentID, endUserID: session.endUserID, holding: session.token)
        if removed {
            sessionEnded(
                SessionEndedEvent(authEnvironmentID: authEnvironmentID, endUserID: session.endUserID, reason: reason))
        }
        throw SessionError.ended(reason: reason, endUserID: session.endUserID)
    }

    /// Removes the session without running the hook (`logout`, or git's erase without a password).
    @discardableResult
    public func remove() throws -> Bool {
        // With no end user named, the session this service would hand out, and no other end
        // user's of the environment.
        let endUser = try endUserID ?? restore()?.endUserID
        return try store.deleteSession(authEnvironmentID: authEnvironmentID, endUserID: endUser)
    }
}
