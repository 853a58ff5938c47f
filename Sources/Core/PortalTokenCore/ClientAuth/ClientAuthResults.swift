/// `GET /methods` (docs/portal-api.md, "Answers").
public struct AuthMethods: Sendable, Equatable {
    /// The methods portal-token knows, in Portal's order; unknown ones are dropped.
    public var allowed: [AuthMethod]
    public var autoCreateWallet: Bool

    public init(allowed: [AuthMethod], autoCreateWallet: Bool) {
        self.allowed = allowed
        self.autoCreateWallet = autoCreateWallet
    }

    /// `{"allowedAuthMethods":[…],"autoCreateWallet":…}`, for `methods --format json`.
    public var json: String {
        JSONValue.object([
            "allowedAuthMethods": .array(allowed.map { .string($0.rawValue) }),
            "autoCreateWallet": .bool(autoCreateWallet),
        ]).serialized
    }
}

/// `GET /oauth/urls` (docs/portal-api.md, "Answers"): each provider's authorize URL, as Portal sent
/// it. The URLs carry a single-use `state` shared by both, so they are secrets and are fetched
/// afresh for every attempt.
public struct OAuthURLs: Sendable, Equatable {
    public var google: Secret?
    public var apple: Secret?

    public init(google: Secret?, apple: Secret?) {
        self.google = google
        self.apple = apple
    }

    /// The provider's URL, trimmed; missing or blank means the method is not available.
    public func url(for method: AuthMethod) throws(ClientAuthError) -> Secret {
        let value: Secret?
        switch method {
        case .google: value = google
        case .apple: value = apple
        case .emailMagicLink: value = nil
        }
        guard let value else { throw .methodUnavailable(method) }
        let trimmed = value.text.trimmingUnicodeWhitespace
        guard !trimmed.isEmpty else { throw .methodUnavailable(method) }
        return Secret(trimmed)
    }
}

/// A completed sign-in: what Portal returned with the session token. The persisted record
/// (docs/portal-api.md, "The session payload") holds only `token` and `endUserID`.
public struct AuthenticatedSession: Sendable, Equatable, CustomStringConvertible {
    public var token: Secret
    public var endUserID: String
    public var clientID: String?
    public var isAccountAbstracted: Bool?

    public init(token: Secret, endUserID: String, clientID: String? = nil, isAccountAbstracted: Bool? = nil) {
        self.token = token
        self.endUserID = endUserID
        self.clientID = clientID
        self.isAccountAbstracted = isAccountAbstracted
    }

    /// The session record to store, issued and active at `now` (Unix seconds).
    public func portalSession(authEnvironmentID: String, at now: Int64) -> PortalSession {
        PortalSession(
            token: token, endUserID: endUserID, authEnvironmentID: authEnvironmentID,
            issuedAt: now, lastActivityAt: now)
    }

    public var description: String { "AuthenticatedSession(endUserID: \(endUserID), token: <redacted>)" }
}

/// The two-factor step a grant exchange may return instead of a session (docs/portal-api.md, "Redirect URLs").
/// Nothing is persisted at this point.
public struct TOTPStep: Sendable, Equatable, CustomStringConvertible {
    /// Short-lived (about 10 minutes); authorises `POST /totps/validations` only, and survives a
    /// wrong code.
    public var userJWT: Secret
    /// An `otpauth://` URI, present only on first enrollment.
    public var totpLink: Secret?
    /// The grant's `endUserId`, `""` when absent: a label only. The session's end user comes
    /// from the `userJWT` (docs/portal-api.md, "The two-factor token").
    public var endUserID: String

    public init(userJWT: Secret, totpLink: Secret?, endUserID: String) {
        self.userJWT = userJWT
        self.totpLink = totpLink
        self.endUserID = endUserID
    }

    public var description: String {
        "TOTPStep(endUserID: \(endUserID), userJWT: <redacted>, totpLink: \(totpLink == nil ? "nil" : "<redacted>"))"
    }
}

/// What a grant exchange yields.
public enum GrantOutcome: Sendable, Equatable {
    /// A session token: persist it before reporting success (docs/portal-api.md, "A redirect delivered twice").
    case authenticated(AuthenticatedSession)
    /// A `userJwt`: ask for a code, then `POST /totps/validations`.
    case totpRequired(TOTPStep)
}
