/// The sign-in methods Portal names on the wire (docs/portal-api.md, "Sign-in methods"), in `/methods`,
/// `authMethod` and `login_type`. Unknown values are dropped wherever they appear.
public enum AuthMethod: String, Sendable, Hashable, CaseIterable {
    case emailMagicLink = "EMAIL_MAGIC_LINK"
    case google = "GOOGLE"
    case apple = "APPLE"
}

/// The six Client Auth endpoints (docs/portal-api.md, "The Client Auth endpoints"), all under `/api/v3/auth`.
public enum ClientAuthEndpoint: String, Sendable, Hashable, CaseIterable {
    case methods = "/api/v3/auth/methods"
    case magicLinks = "/api/v3/auth/magic-links"
    case magicLinkValidations = "/api/v3/auth/magic-links/validations"
    case oauthURLs = "/api/v3/auth/oauth/urls"
    case oauthTokens = "/api/v3/auth/oauth/tokens"
    case totpValidations = "/api/v3/auth/totps/validations"

    /// The bare path: what messages name, never with a query.
    public var path: String { rawValue }

    public var method: String {
        switch self {
        case .methods, .oauthURLs: return "GET"
        case .magicLinks, .magicLinkValidations, .oauthTokens, .totpValidations: return "POST"
        }
    }
}

/// Where a grant from a redirect is exchanged (docs/portal-api.md, "Redirect URLs").
public enum GrantEndpoint: Sendable, Hashable {
    /// `POST /api/v3/auth/magic-links/validations`: the redirect said `authMethod=EMAIL_MAGIC_LINK`.
    case magicLinkValidations
    /// `POST /api/v3/auth/oauth/tokens`: the redirect said `login_type=GOOGLE` or `APPLE`.
    case oauthTokens

    public var endpoint: ClientAuthEndpoint {
        switch self {
        case .magicLinkValidations: return .magicLinkValidations
        case .oauthTokens: return .oauthTokens
        }
    }
}
