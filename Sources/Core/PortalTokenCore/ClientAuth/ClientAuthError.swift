/// What a sign-in step can be refused for, keeping the SDK's distinctions (docs/portal-api.md, "Errors", "Redirect
/// URLs", "The two-factor token", "Email addresses"; docs/settings.md, "Settings Portal sign-in checks"), each with a
/// message in git's grammar, an optional hint, and the exit code (docs/exit-codes.md, "The codes").
///
/// No case carries, and no message shows, a grant, a JWT, a session token, a URL with a query,
/// a `totpLink` or its secret, a code or an email address. Text from Portal or from a redirect
/// is bounded (200 and 100 Characters) and shown with control characters replaced.
public enum ClientAuthError: Error, Sendable, Equatable {
    /// A required value is blank, or a code is not six digits (checked before any request).
    case invalidArgument(ClientAuthArgument)
    /// A value holds a line break or another control character, which no header or JSON body
    /// should carry.
    case argumentNotOneLine(ClientAuthArgument)
    /// `login --email` without the sender and template settings (docs/portal-api.md, "Email addresses"); lists the
    /// missing ones.
    case magicLinkNotConfigured(missing: [Setting])
    /// The provider's authorize URL was missing or blank in `/oauth/urls` (docs/portal-api.md, "Answers").
    case methodUnavailable(AuthMethod)
    /// The redirect carried `error=…`: the decoded value, at most 100 Characters (docs/portal-api.md, "Redirect URLs").
    case authenticationFailed(String)
    /// `POST /magic-links` answered 429. Never retried: each attempt sends an email.
    case rateLimited
    /// 400 with a string `error` to a request that asked for account abstraction: that text,
    /// at most 200 Characters (docs/portal-api.md, "Errors").
    case accountAbstractionUnavailable(String)
    /// A grant exchange answered with neither a session token nor a `userJwt` (docs/portal-api.md, "Redirect URLs").
    case invalidGrantResponse
    /// The `userJwt` cannot name its end user (docs/portal-api.md, "The two-factor token").
    case invalidUserJWT(UserJWT.Problem)
    /// A success answer without the `data` envelope or a required field (docs/portal-api.md, "Headers", "Answers").
    case malformedResponse(ClientAuthEndpoint, missing: String)
    /// 401 from a sign-in endpoint. Never a sign that a session ended (docs/portal-api.md, "Headers", "When a 401 ends
    /// a session").
    case unauthorized(ClientAuthEndpoint)
    /// Another 4xx; `serverMessage` is the body's `error` string, bounded, when it had one and
    /// it repeats nothing private that the request carried.
    case clientError(ClientAuthEndpoint, status: Int, serverMessage: String?)
    /// 5xx.
    case serverError(ClientAuthEndpoint, status: Int)
    /// A status that is neither success nor error (1xx, 3xx): redirects are never followed.
    case unexpectedStatus(ClientAuthEndpoint, status: Int)
    /// No HTTP answer at all.
    case network(HTTPError)
    /// The API host is one the bearer gate (docs/portal-api.md, "Portal hosts") will not send the `userJwt` to, such as
    /// an IPv6 literal; the two-factor step cannot be sent there.
    case apiHostRefusesBearer

    /// See docs/exit-codes.md, "The codes".
    public var exitCode: ExitCode {
        switch self {
        case .invalidArgument, .argumentNotOneLine, .magicLinkNotConfigured, .apiHostRefusesBearer:
            return .usage
        case .unauthorized(let endpoint):
            // A 401 before any grant exists means Portal refused the configuration (environment,
            // redirect URL, sender, template); after it, the grant or the code.
            switch endpoint {
            case .methods, .magicLinks, .oauthURLs: return .usage
            case .magicLinkValidations, .oauthTokens, .totpValidations: return .rejected
            }
        case .network, .serverError:
            return .network
        case .methodUnavailable, .authenticationFailed, .rateLimited, .accountAbstractionUnavailable,
            .invalidGrantResponse, .invalidUserJWT, .malformedResponse, .clientError, .unexpectedStatus:
            return .rejected
        }
    }

    /// One line, lowercase, no full stop: what failed first.
    public var message: String {
        switch self {
        case .invalidArgument(let argument):
            switch argument {
            case .authEnvironmentID: return "no auth environment ID is set"
            case .redirectURL: return "no redirect URL is set"
            case .email: return "the email address is empty"
            case .totpCode: return "the two-factor code must be exactly six digits"
            }
        case .argumentNotOneLine(let argument):
            return "\(argument.noun) holds a line break or a control character"
        case .magicLinkNotConfigured(let missing):
            let names = missing.compactMap(\.environment)
            let list = names.count == 2 ? "\(names[0]) and \(names[1])" : names.joined(separator: ", ")
            return "magic-link sign-in is not configured: \(list) \(names.count == 1 ? "is" : "are") not set"
        case .methodUnavailable(let method):
            return "sign-in with \(method.rawValue) is not available for this auth environment"
        case .authenticationFailed(let text):
            let shown = Self.displayable(text)
            return shown.isEmpty ? "sign-in failed" : "sign-in failed: \(shown)"
        case .rateLimited:
            return "too many links were sent to this address; wait a minute"
        case .accountAbstractionUnavailable(let text):
            let shown = Self.displayable(text)
            return shown.isEmpty
                ? "account abstraction is not available" : "account abstraction is not available: \(shown)"
        case .invalidGrantResponse:
            return "Portal's answer to the sign-in held neither a session token nor a userJwt"
        case .invalidUserJWT(let problem):
            return "the two-factor token from Portal is unusable: \(problem.detail)"
        case .malformedResponse(let endpoint, let missing):
            return "malformed response from \(endpoint.path): missing \"\(missing)\""
        case .unauthorized(let endpoint):
            switch endpoint {
            case .methods:
                return "Portal did not accept the auth environment ID"
            case .magicLinks:
                return
                    """
                    Portal did not accept the magic-link request: the redirect URL, sender or template is not \
                    accepted for this auth environment
                    """
            case .oauthURLs:
                return
                    """
                    Portal did not accept the sign-in request: the auth environment, the redirect URL or the \
                    provider set-up was refused
                    """
            case .magicLinkValidations, .oauthTokens:
                return "Portal refused the sign-in grant: it was already used or has expired"
            case .totpValidations:
                return "Portal refused the two-factor code"
            }
        case .clientError(let endpoint, let status, let serverMessage):
            let what: String
            switch endpoint {
            case .magicLinkValidations, .oauthTokens: what = "Portal refused the sign-in grant"
            case .totpValidations: what = "Portal refused the two-factor code"
            default: what = "Portal refused the request to \(endpoint.path)"
            }
            let detail = serverMessage.map(Self.displayable) ?? ""
            return detail.isEmpty ? "\(what) (HTTP \(status))" : "\(what) (HTTP \(status)): \(detail)"
        case .serverError(let endpoint, let status):
            return "Portal failed to answer \(endpoint.path) (HTTP \(status))"
        case .unexpectedStatus(let endpoint, let status):
            return "Portal answered \(endpoint.path) with HTTP \(status)"
        case .network(let error):
            return error.message
        case .apiHostRefusesBearer:
            return "the API host may not be sent the two-factor token"
        }
    }

    /// The fix, where one exists.
    public var hint: String? {
        switch self {
        case .invalidArgument(let argument):
            switch argument {
            case .authEnvironmentID:
                return "pass --env ID, or set PORTAL_AUTH_ENVIRONMENT_ID or auth-environment-id in the config file"
            case .redirectURL:
                return "pass --redirect-url URL, or set PORTAL_REDIRECT_URL or redirect-url in the config file"
            case .email:
                return "pass --email ADDRESS"
            case .totpCode:
                return "enter the six-digit code your authenticator app shows now"
            }
        case .argumentNotOneLine:
            return nil
        case .magicLinkNotConfigured:
            return
                """
                set the sender address and the email template Portal's dashboard names (magic-link-from-email and \
                magic-link-template-id in the config file)
                """
        case .methodUnavailable:
            return "run 'portal-token methods' to see the methods this environment allows"
        case .authenticationFailed:
            return "run 'portal-token login' again"
        case .rateLimited:
            return nil
        case .accountAbstractionUnavailable:
            return "leave --account-abstracted (PORTAL_ACCOUNT_ABSTRACTED) unset to use the environment's default"
        case .invalidGrantResponse, .malformedResponse, .unexpectedStatus:
            return nil
        case .invalidUserJWT:
            return "run 'portal-token login' again"
        case .unauthorized(let endpoint):
            switch endpoint {
            case .methods:
                return "check --env or PORTAL_AUTH_ENVIRONMENT_ID, and --api-host"
            case .magicLinks, .oauthURLs:
                return
                    """
                    the redirect URL must match the environment's allow-list byte for byte; check it, the auth \
                    environment ID, and the sender and template in Portal's dashboard
                    """
            case .magicLinkValidations, .oauthTokens:
                return "a sign-in link works once and for a limited time; run 'portal-token login' again"
            case .totpValidations:
                return "enter the code your authenticator app shows now"
            }
        case .clientError(let endpoint, _, _):
            switch endpoint {
            case .magicLinkValidations, .oauthTokens:
                return "a sign-in link works once and for a limited time; run 'portal-token login' again"
            case .totpValidations:
                return "enter the code your authenticator app shows now"
            case .magicLinks, .oauthURLs:
                return "the redirect URL must match the environment's allow-list byte for byte"
            default:
                return nil
            }
        case .serverError:
            return "try again later"
        case .network(let error):
            return error.hint
        case .apiHostRefusesBearer:
            return "use an https API host, or localhost or 127.0.0.1 for a local server"
        }
    }

    /// Whether a prompt may ask for another code with the same `userJwt`: Portal refused the
    /// code (400 or 401), which does not spend the token (docs/portal-api.md, "Errors").
    public var isRejectedCode: Bool {
        switch self {
        case .unauthorized(.totpValidations): return true
        case .clientError(.totpValidations, let status, _): return status == 400
        default: return false
        }
    }

    /// Text from outside made safe for one line of a terminal: control and format characters
    /// (escape sequences, line breaks, bidirectional overrides) become U+FFFD.
    static func displayable(_ text: String) -> String {
        var output = ""
        output.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                output.unicodeScalars.append("\u{FFFD}")
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}

/// The values a sign-in step checks before any request.
public enum ClientAuthArgument: String, Sendable, Hashable {
    case authEnvironmentID = "authEnvironmentId"
    case redirectURL = "redirectUrl"
    case email
    case totpCode = "code"

    var noun: String {
        switch self {
        case .authEnvironmentID: return "the auth environment ID"
        case .redirectURL: return "the redirect URL"
        case .email: return "the email address"
        case .totpCode: return "the two-factor code"
        }
    }
}
