/// Requests and answers of the six Client Auth endpoints (docs/portal-api.md, "The Client Auth endpoints"), with the
/// status mapping (docs/portal-api.md, "Errors"). Pure: the transport is the caller's (see `ClientAuthClient`).
///
/// Every request carries `x-portal-auth-environment-id` and the header policy of
/// `PortalRequestBuilder` (JSON headers, trace id, user agent). None carries the session token:
/// this type never sees one. Only `POST /totps/validations` carries a bearer, the `userJwt`.
public struct ClientAuthAPI: Sendable {
    public static let environmentHeader = "x-portal-auth-environment-id"
    /// Bound on Portal's text shown in a message (docs/portal-api.md, "Errors"; docs/security.md, "What never leaks").
    public static let maximumServerMessageLength = 200

    public let configuration: ClientAuthConfiguration
    public let apiBase: PortalAPIBase
    public let builder: PortalRequestBuilder

    public init(configuration: ClientAuthConfiguration, apiBase: PortalAPIBase, builder: PortalRequestBuilder) {
        self.configuration = configuration
        self.apiBase = apiBase
        self.builder = builder
    }

    // MARK: Requests

    /// `GET /api/v3/auth/methods`.
    public func methodsRequest() -> HTTPRequest {
        request(.methods)
    }

    /// `POST /api/v3/auth/magic-links` with `email` (already normalised, docs/portal-api.md, "Email addresses"), the
    /// redirect URL, sender and template, and `isAccountAbstracted` only when configured.
    public func magicLinkRequest(email: Secret) throws(ClientAuthError) -> HTTPRequest {
        let redirectURL = try configuration.requireRedirectURL()
        let magicLink = try configuration.requireMagicLink()
        var members: [String: JSONValue] = [
            "email": .string(email.text),
            "redirectUrl": .string(redirectURL),
            "fromEmail": .string(magicLink.fromEmail),
            "templateId": .string(magicLink.templateID),
        ]
        if let accountAbstracted = configuration.accountAbstracted {
            members["isAccountAbstracted"] = .bool(accountAbstracted)
        }
        return request(.magicLinks, body: JSONValue.object(members))
    }

    /// `GET /api/v3/auth/oauth/urls?redirectUrl=…[&isAccountAbstracted=…]` (docs/portal-api.md, "Form encoding").
    public func oauthURLsRequest() throws(ClientAuthError) -> HTTPRequest {
        let redirectURL = try configuration.requireRedirectURL()
        let query = FormURLEncoding.oauthURLsQuery(
            redirectURL: redirectURL,
            accountAbstracted: configuration.accountAbstracted)
        return request(.oauthURLs, query: query)
    }

    /// `POST /magic-links/validations` or `/oauth/tokens` with `{"token": grant}`, exactly one key.
    public func grantExchangeRequest(grant: Secret, at endpoint: GrantEndpoint) -> HTTPRequest {
        request(endpoint.endpoint, body: .object(["token": .string(grant.text)]))
    }

    /// `POST /totps/validations` with `{"code": code}` verbatim and `Authorization: Bearer <userJwt>`.
    /// Throws when the bearer gate will not let the `userJwt` go to the API host.
    public func totpValidationRequest(code: Secret, userJWT: Secret) throws(ClientAuthError) -> HTTPRequest {
        let request = request(.totpValidations, body: .object(["code": .string(code.text)]), bearer: userJWT)
        guard request.authorization != nil else { throw .apiHostRefusesBearer }
        return request
    }

    private func request(
        _ endpoint: ClientAuthEndpoint, query: String? = nil, body: JSONValue? = nil,
        bearer: Secret? = nil
    ) -> HTTPRequest {
        var url = apiBase.url(path: endpoint.path)
        if let query { url += "?" + query }
        return builder.request(
            endpoint.method, url, body: body.map { Array($0.serialized.utf8) }, bearer: bearer,
            extraHeaders: [HTTPHeader(Self.environmentHeader, configuration.authEnvironmentID)])
    }

    // MARK: Answers

    /// `/methods`: unknown methods dropped; missing list → `[]`, missing `autoCreateWallet` → false.
    public func decodeMethods(_ response: HTTPResponse) throws(ClientAuthError) -> AuthMethods {
        try check(response, .methods)
        let data = try envelope(response, .methods)
        let list = try field(data, "allowedAuthMethods", .methods) { $0.arrayValue }
        var allowed: [AuthMethod] = []
        for item in list ?? [] {
            guard let text = item.stringValue else { throw .malformedResponse(.methods, missing: "data") }
            if let method = AuthMethod(rawValue: text) { allowed.append(method) }
        }
        let autoCreateWallet = try field(data, "autoCreateWallet", .methods) { $0.boolValue }
        return AuthMethods(allowed: allowed, autoCreateWallet: autoCreateWallet ?? false)
    }

    /// `/magic-links`: only the status matters; the body is ignored.
    public func checkMagicLinkSent(_ response: HTTPResponse, email: Secret) throws(ClientAuthError) {
        try check(response, .magicLinks, privateValues: [email])
    }

    /// `/oauth/urls`: either provider may be absent or `null`.
    public func decodeOAuthURLs(_ response: HTTPResponse) throws(ClientAuthError) -> OAuthURLs {
        try check(response, .oauthURLs)
        let data = try envelope(response, .oauthURLs)
        let google = try field(data, "google", .oauthURLs) { $0.stringValue }
        let apple = try field(data, "apple", .oauthURLs) { $0.stringValue }
        return OAuthURLs(google: google.map(Secret.init), apple: apple.map(Secret.init))
    }

    /// A grant exchange (docs/portal-api.md, "Answers", "Redirect URLs"): a non-blank session token needs a
    /// non-blank `endUserId`; else a non-blank `userJwt` is a two-factor step; else the answer
    /// is unusable. A blank value counts as absent.
    public func decodeGrant(_ response: HTTPResponse, from endpoint: GrantEndpoint, grant: Secret)
        throws(ClientAuthError) -> GrantOutcome
    {
        let path = endpoint.endpoint
        try check(response, path, privateValues: [grant])
        let data = try envelope(response, path)
        let token = try field(data, "clientSessionToken", path) { $0.stringValue }.flatMap(nonBlank)
        let endUserID = try field(data, "endUserId", path) { $0.stringValue }
        let clientID = try field(data, "clientId", path) { $0.stringValue }
        let isAccountAbstracted = try field(data, "isAccountAbstracted", path) { $0.boolValue }
        let userJWT = try field(data, "userJwt", path) { $0.stringValue }.flatMap(nonBlank)
        let totpLink = try field(data, "totpLink", path) { $0.stringValue }.flatMap(nonBlank)
        if let token {
            guard let endUserID = endUserID.flatMap(nonBlank) else {
                throw .malformedResponse(path, missing: "endUserId")
            }
            return .authenticated(
                AuthenticatedSession(
                    token: Secret(token), endUserID: endUserID, clientID: clientID,
                    isAccountAbstracted: isAccountAbstracted))
        }
        if let userJWT {
            return .totpRequired(
                TOTPStep(
                    userJWT: Secret(userJWT), totpLink: totpLink.map(Secret.init),
                    endUserID: endUserID ?? ""))
        }
        throw .invalidGrantResponse
    }

    /// `/totps/validations` (docs/portal-api.md, "Answers"): a non-blank session token; the end user is the
    /// one read from the `userJwt` before the call.
    public func decodeTOTP(_ response: HTTPResponse, endUserID: String, code: Secret, userJWT: Secret)
        throws(ClientAuthError) -> AuthenticatedSession
    {
        try check(response, .totpValidations, privateValues: [code, userJWT])
        let data = try envelope(response, .totpValidations)
        guard let token = try field(data, "clientSessionToken", .totpValidations, { $0.stringValue }).flatMap(nonBlank)
        else {
            throw .malformedResponse(.totpValidations, missing: "clientSessionToken")
        }
        let clientID = try field(data, "clientId", .totpValidations) { $0.stringValue }
        let isAccountAbstracted = try field(data, "isAccountAbstracted", .totpValidations) { $0.boolValue }
        return AuthenticatedSession(
            token: Secret(token), endUserID: endUserID, clientID: clientID,
            isAccountAbstracted: isAccountAbstracted)
    }

    // MARK: Status mapping (docs/portal-api.md, "Headers", "Errors")

    /// Success passes; 401 is `unauthorized`; 429 on `/magic-links` is `rateLimited`; a 400
    /// with a string `error` to a request that asked for account abstraction is
    /// `accountAbstractionUnavailable`; other 4xx `clientError`; 5xx `serverError`.
    /// `privateValues` are what the request carried that must not come back in a message.
    public func check(_ response: HTTPResponse, _ endpoint: ClientAuthEndpoint, privateValues: [Secret] = [])
        throws(ClientAuthError)
    {
        let status = response.status
        if (200..<300).contains(status) { return }
        if status == 401 { throw .unauthorized(endpoint) }
        if status == 429, endpoint == .magicLinks { throw .rateLimited }
        if status == 400, endpoint == .magicLinks || endpoint == .oauthURLs, configuration.accountAbstracted == true,
            let text = Self.errorString(in: response.body)
        {
            throw .accountAbstractionUnavailable(String(text.prefix(Self.maximumServerMessageLength)))
        }
        if (400..<500).contains(status) {
            throw .clientError(
                endpoint, status: status, serverMessage: serverMessage(in: response.body, privateValues: privateValues))
        }
        if status >= 500 { throw .serverError(endpoint, status: status) }
        throw .unexpectedStatus(endpoint, status: status)
    }

    /// The body's `error` string, bounded, unless it repeats something private the request
    /// carried (or this configuration's redirect URL) or names a URL.
    private func serverMessage(in body: [UInt8], privateValues: [Secret]) -> String? {
        guard let text = Self.errorString(in: body) else { return nil }
        let bounded = String(text.prefix(Self.maximumServerMessageLength))
        let lowered = bounded.lowercased()
        var forbidden = privateValues.map { $0.text }
        if let redirectURL = configuration.redirectURL { forbidden.append(redirectURL) }
        for value in forbidden where !value.isEmpty && lowered.contains(value.lowercased()) { return nil }
        if lowered.contains("://") { return nil }
        return bounded
    }

    static func errorString(in body: [UInt8]) -> String? {
        guard let value = try? JSONValue.parse(body) else { return nil }
        return value["error"]?.stringValue
    }

    // MARK: The `data` envelope

    private func envelope(_ response: HTTPResponse, _ endpoint: ClientAuthEndpoint) throws(ClientAuthError) -> [String:
        JSONValue]
    {
        guard let value = try? JSONValue.parse(response.body), case .object(let data)? = value["data"] else {
            throw .malformedResponse(endpoint, missing: "data")
        }
        return data
    }

    /// An optional field: absent and `null` read as nil; any other type is a malformed answer.
    private func field<T>(
        _ data: [String: JSONValue], _ name: String, _ endpoint: ClientAuthEndpoint,
        _ read: (JSONValue) -> T?
    ) throws(ClientAuthError) -> T? {
        guard let value = data[name], value != .null else { return nil }
        guard let typed = read(value) else { throw .malformedResponse(endpoint, missing: "data") }
        return typed
    }

    private func nonBlank(_ text: String) -> String? { text.isBlank ? nil : text }
}

/// The six calls, each sent once through a transport and mapped (docs/portal-api.md, "Headers": never retried on
/// the user's behalf).
public struct ClientAuthClient: Sendable {
    public let api: ClientAuthAPI
    public let transport: any HTTPTransport

    public init(api: ClientAuthAPI, transport: any HTTPTransport) {
        self.api = api
        self.transport = transport
    }

    /// `portal-token methods`.
    public func methods() throws(ClientAuthError) -> AuthMethods {
        try api.decodeMethods(send(api.methodsRequest()))
    }

    /// Sends a magic link to `email` (trimmed and lowercased first, docs/portal-api.md, "Email addresses"). The
    /// configuration checks (redirect URL, sender, template) come before any request.
    public func sendMagicLink(email: String) throws(ClientAuthError) {
        let address = try EmailAddress.normalize(email)
        let request = try api.magicLinkRequest(email: address)
        try api.checkMagicLinkSent(send(request), email: address)
    }

    /// The provider's authorize URL, from a fresh `GET /oauth/urls` (its `state` is single-use).
    public func authorizeURL(for method: AuthMethod) throws(ClientAuthError) -> Secret {
        guard method != .emailMagicLink else { throw .methodUnavailable(method) }
        return try api.decodeOAuthURLs(send(api.oauthURLsRequest())).url(for: method)
    }

    /// Exchanges a grant from a redirect, once.
    public func exchange(grant: Secret, at endpoint: GrantEndpoint) throws(ClientAuthError) -> GrantOutcome {
        try api.decodeGrant(send(api.grantExchangeRequest(grant: grant, at: endpoint)), from: endpoint, grant: grant)
    }

    /// Completes a two-factor step. The end user is read from the `userJwt` and the code
    /// checked (six digits) before anything is sent. A rejected code (`isRejectedCode`) leaves
    /// the `userJwt` usable for another try.
    public func verifyTOTP(code: String, userJWT: Secret) throws(ClientAuthError) -> AuthenticatedSession {
        let endUserID = try UserJWT.endUserID(in: userJWT)
        let checkedCode = try TOTPCode.validate(code)
        let request = try api.totpValidationRequest(code: checkedCode, userJWT: userJWT)
        return try api.decodeTOTP(send(request), endUserID: endUserID, code: checkedCode, userJWT: userJWT)
    }

    private func send(_ request: HTTPRequest) throws(ClientAuthError) -> HTTPResponse {
        do {
            return try transport.send(request)
        } catch {
            throw .network(error)
        }
    }
}
