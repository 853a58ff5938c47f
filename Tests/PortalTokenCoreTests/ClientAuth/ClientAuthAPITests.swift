import PortalTokenCore
import PortalTokenTestSupport
import Testing

enum ClientAuthFixture {
    static func configuration(
        redirectURL: String? = "myapp://auth/callback", accountAbstracted: Bool? = nil,
        from: String? = "noreply@example.com", template: String? = "template-1"
    ) throws -> ClientAuthConfiguration {
        try ClientAuthConfiguration(
            authEnvironmentID: "env-1", redirectURL: redirectURL, accountAbstracted: accountAbstracted,
            magicLinkFromEmail: from, magicLinkTemplateID: template)
    }

    static func api(
        apiHost: String = "api.portalhq.io", redirectURL: String? = "myapp://auth/callback",
        accountAbstracted: Bool? = nil
    ) throws -> ClientAuthAPI {
        let base = try PortalAPIBase(apiHost: apiHost)
        return ClientAuthAPI(
            configuration: try configuration(redirectURL: redirectURL, accountAbstracted: accountAbstracted),
            apiBase: base, builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0"))
    }

    static func client(_ transport: ScriptedTransport, accountAbstracted: Bool? = nil) throws -> ClientAuthClient {
        ClientAuthClient(api: try api(accountAbstracted: accountAbstracted), transport: transport)
    }

    static func response(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, body: Array(body.utf8), effectiveURL: "")
    }

    static func body(_ request: HTTPRequest) -> JSONValue? {
        request.body.flatMap { try? JSONValue.parse($0) }
    }

    /// The `ClientAuthError` the body threw; nil when it threw nothing (any other error fails the test).
    static func thrown<T>(_ body: () throws -> T) -> ClientAuthError? {
        do {
            _ = try body()
            return nil
        } catch let error as ClientAuthError {
            return error
        } catch {
            Issue.record("unexpected error \(type(of: error))")
            return nil
        }
    }
}

/// docs/portal-api.md, "Headers", "The Client Auth endpoints": the six requests.
@Suite("Client Auth requests")
struct ClientAuthRequestTests {
    typealias F = ClientAuthFixture

    static func requests() throws -> [(ClientAuthEndpoint, HTTPRequest)] {
        let api = try F.api()
        return [
            (.methods, api.methodsRequest()),
            (.magicLinks, try api.magicLinkRequest(email: Secret("user@example.com"))),
            (.magicLinkValidations, api.grantExchangeRequest(grant: Secret("grant"), at: .magicLinkValidations)),
            (.oauthURLs, try api.oauthURLsRequest()),
            (.oauthTokens, api.grantExchangeRequest(grant: Secret("grant"), at: .oauthTokens)),
            (
                .totpValidations,
                try api.totpValidationRequest(code: Secret("777870"), userJWT: JWTFixture.userJWT(endUserID: "u"))
            ),
        ]
    }

    @Test("the six requests go to the exact URLs of docs/portal-api.md")
    func urls() throws {
        let urls = try Self.requests().map { "\($0.1.method) \($0.1.url)" }
        #expect(
            urls == [
                "GET https://api.portalhq.io/api/v3/auth/methods",
                "POST https://api.portalhq.io/api/v3/auth/magic-links",
                "POST https://api.portalhq.io/api/v3/auth/magic-links/validations",
                "GET https://api.portalhq.io/api/v3/auth/oauth/urls?redirectUrl=myapp%3A%2F%2Fauth%2Fcallback",
                "POST https://api.portalhq.io/api/v3/auth/oauth/tokens",
                "POST https://api.portalhq.io/api/v3/auth/totps/validations",
            ])
    }

    @Test("every request names the auth environment, sends JSON headers and a fresh trace id")
    func headers() throws {
        let requests = try Self.requests()
        var traceIDs = Set<String>()
        for (_, request) in requests {
            #expect(request.headers.value(for: "x-portal-auth-environment-id") == "env-1")
            #expect(request.headers.first { $0.name == "x-portal-auth-environment-id" } != nil)
            #expect(request.headers.value(for: "Accept") == "application/json")
            #expect(request.headers.value(for: "Content-Type") == "application/json")
            let traceID = try #require(request.headers.value(for: "X-Portal-Trace-Id"))
            #expect(TraceID.isValid(traceID))
            traceIDs.insert(traceID)
            #expect((request.headers.value(for: "Content-Length") != nil) == (request.body != nil))
        }
        #expect(traceIDs.count == requests.count)
    }

    @Test("only the two-factor validation carries a bearer, and it is the userJwt")
    func bearers() throws {
        let jwt = JWTFixture.userJWT(endUserID: "u")
        for (endpoint, request) in try Self.requests() {
            if endpoint == .totpValidations {
                #expect(request.authorization == Secret("Bearer " + jwt.text))
            } else {
                #expect(request.authorization == nil, "\(endpoint)")
            }
        }
    }

    @Test("a local API host gets the userJwt over plain http, at its own port")
    func localBearer() throws {
        let api = try F.api(apiHost: "localhost:3000")
        let request = try api.totpValidationRequest(code: Secret("123456"), userJWT: Secret("jwt"))
        #expect(request.url == "http://localhost:3000/api/v3/auth/totps/validations")
        #expect(request.authorization == Secret("Bearer jwt"))
        #expect(
            api.grantExchangeRequest(grant: Secret("g"), at: .magicLinkValidations).url
                == "http://localhost:3000/api/v3/auth/magic-links/validations")
    }

    @Test("an API host the bearer gate refuses stops the two-factor request before it is built")
    func refusedBearer() throws {
        let api = try F.api(apiHost: "[::1]:3000")
        #expect(
            F.thrown { try api.totpValidationRequest(code: Secret("123456"), userJWT: Secret("jwt")) }
                == .apiHostRefusesBearer)
    }

    @Test("the magic-link body has the four strings and omits isAccountAbstracted when unset")
    func magicLinkBody() throws {
        let request = try F.api().magicLinkRequest(email: Secret("user@example.com"))
        #expect(
            F.body(request)
                == .object([
                    "email": .string("user@example.com"), "redirectUrl": .string("myapp://auth/callback"),
                    "fromEmail": .string("noreply@example.com"), "templateId": .string("template-1"),
                ]))
        for setting in [true, false] {
            let aa = try F.api(accountAbstracted: setting).magicLinkRequest(email: Secret("user@example.com"))
            #expect(F.body(aa)?["isAccountAbstracted"] == .bool(setting))
        }
    }

    @Test("the oauth/urls query carries isAccountAbstracted only when configured")
    func oauthQuery() throws {
        #expect(try F.api(accountAbstracted: true).oauthURLsRequest().url.hasSuffix("&isAccountAbstracted=true"))
        #expect(try F.api(accountAbstracted: false).oauthURLsRequest().url.hasSuffix("&isAccountAbstracted=false"))
        #expect(try !F.api().oauthURLsRequest().url.contains("isAccountAbstracted"))
        #expect(
            try F.api(redirectURL: "portalexample://auth/callback").oauthURLsRequest().url
                == "https://api.portalhq.io/api/v3/auth/oauth/urls?redirectUrl=portalexample%3A%2F%2Fauth%2Fcallback")
    }

    @Test("grant and code bodies are exactly one key, verbatim")
    func oneKeyBodies() throws {
        let api = try F.api()
        let grant = api.grantExchangeRequest(grant: Secret("grant+token/é"), at: .oauthTokens)
        #expect(F.body(grant) == .object(["token": .string("grant+token/é")]))
        let code = try api.totpValidationRequest(code: Secret("000000"), userJWT: Secret("jwt"))
        #expect(F.body(code) == .object(["code": .string("000000")]))
    }

    @Test("no rendering of a request shows the grant, the code, the email or the userJwt")
    func renderings() throws {
        for (_, request) in try Self.requests() {
            for text in [String(describing: request), String(reflecting: request)] {
                for secret in ["grant", "777870", "user@example.com", "eyJ"] { #expect(!text.contains(secret)) }
            }
        }
    }
}

/// docs/portal-api.md, "Answers", "Errors", "Redirect URLs": answers.
@Suite("Client Auth answers")
struct ClientAuthAnswerTests {
    typealias F = ClientAuthFixture

    @Test(
        "methods: unknown values are dropped and missing fields default",
        arguments: [
            (
                #"{"data":{"allowedAuthMethods":["EMAIL_MAGIC_LINK","PASSKEY","GOOGLE"],"autoCreateWallet":true}}"#,
                AuthMethods(allowed: [.emailMagicLink, .google], autoCreateWallet: true)
            ),
            (#"{"data":{"allowedAuthMethods":["PASSKEY"]}}"#, AuthMethods(allowed: [], autoCreateWallet: false)),
            (#"{"data":{}}"#, AuthMethods(allowed: [], autoCreateWallet: false)),
            (
                #"{"data":{"allowedAuthMethods":null,"autoCreateWallet":null}}"#,
                AuthMethods(allowed: [], autoCreateWallet: false)
            ),
            (
                #"{"data":{"allowedAuthMethods":["APPLE","google"]}}"#,
                AuthMethods(allowed: [.apple], autoCreateWallet: false)
            ),
        ])
    func methods(body: String, expected: AuthMethods) throws {
        #expect(try F.api().decodeMethods(F.response(200, body)) == expected)
    }

    @Test(
        "a success body without a usable data envelope is malformed, naming the bare path",
        arguments: [
            "", "<html>", "null", "[]", #"{"meta":{}}"#, #"{"data":null}"#, #"{"data":"x"}"#,
            #"{"data":{"allowedAuthMethods":"EMAIL_MAGIC_LINK"}}"#, #"{"data":{"allowedAuthMethods":[1]}}"#,
            #"{"data":{"autoCreateWallet":"yes"}}"#,
        ])
    func malformedMethods(body: String) throws {
        let error = F.thrown { try F.api().decodeMethods(F.response(200, body)) }
        #expect(error == .malformedResponse(.methods, missing: "data"))
        #expect(error?.message == #"malformed response from /api/v3/auth/methods: missing "data""#)
    }

    @Test("the magic-link answer body is ignored", arguments: [#"{"data":{"sent":true}}"#, "{}", "", "<html>"])
    func magicLinkBodies(body: String) throws {
        try F.api().checkMagicLinkSent(F.response(200, body), email: Secret("user@example.com"))
    }

    @Test("oauth URLs: absent and null providers read as absent; a blank one means the method is unavailable")
    func oauthURLs() throws {
        let api = try F.api()
        let both = try api.decodeOAuthURLs(
            F.response(
                200,
                #"""
                {"data":{"google":" https://accounts.google.com/o?state=s \n",\#
                "apple":"https://appleid.apple.com/a?state=s"}}
                """#
            ))
        #expect(try both.url(for: .google) == Secret("https://accounts.google.com/o?state=s"))
        #expect(try both.url(for: .apple) == Secret("https://appleid.apple.com/a?state=s"))
        let none = try api.decodeOAuthURLs(F.response(200, #"{"data":{}}"#))
        #expect(none == OAuthURLs(google: nil, apple: nil))
        #expect(F.thrown { try none.url(for: .apple) } == .methodUnavailable(.apple))
        let null = try api.decodeOAuthURLs(F.response(200, #"{"data":{"google":null}}"#))
        #expect(null.google == nil)
        for blank in ["", "   ", "\\n"] {
            let urls = try api.decodeOAuthURLs(F.response(200, #"{"data":{"google":"\#(blank)"}}"#))
            let error = F.thrown { try urls.url(for: .google) }
            #expect(error == .methodUnavailable(.google))
            #expect(error?.message.contains("GOOGLE") == true)
            #expect(error?.exitCode == .rejected)
        }
    }

    @Test("a grant answer with a session token is a sign-in")
    func authenticated() throws {
        let outcome = try F.api().decodeGrant(
            F.response(
                200,
                #"""
                {"data":{"endUserId":"user-1","clientId":"client-1","clientSessionToken":"session-token",\#
                "isAccountAbstracted":false}}
                """#
            ),
            from: .magicLinkValidations, grant: Secret("g"))
        #expect(
            outcome
                == .authenticated(
                    AuthenticatedSession(
                        token: Secret("session-token"), endUserID: "user-1",
                        clientID: "client-1", isAccountAbstracted: false)))
    }

    @Test(
        "a session token without an end user is malformed",
        arguments: [
            #"{"clientSessionToken":"t"}"#, #"{"clientSessionToken":"t","endUserId":null}"#,
            #"{"clientSessionToken":"t","endUserId":""}"#, #"{"clientSessionToken":"t","endUserId":" \n"}"#,
        ])
    func missingEndUser(data: String) throws {
        let error = F.thrown {
            try F.api().decodeGrant(F.response(200, #"{"data":\#(data)}"#), from: .oauthTokens, grant: Secret("g"))
        }
        #expect(error == .malformedResponse(.oauthTokens, missing: "endUserId"))
    }

    @Test(
        "a grant answer with neither a session token nor a userJwt is refused",
        arguments: [
            #"{"endUserId":"user-1"}"#, #"{"clientSessionToken":"","userJwt":""}"#, #"{"clientSessionToken":"  \n"}"#,
            #"{"userJwt":"   "}"#, "{}",
        ])
    func invalidGrant(data: String) throws {
        let error = F.thrown {
            try F.api().decodeGrant(
                F.response(200, #"{"data":\#(data)}"#), from: .magicLinkValidations, grant: Secret("g"))
        }
        #expect(error == .invalidGrantResponse)
        #expect(error?.message.contains("neither a session token nor a userJwt") == true)
    }

    @Test(
        "a blank session token with a userJwt is a two-factor step",
        arguments: [
            #"{"clientSessionToken":"   ","userJwt":"jwt-1","endUserId":"label"}"#,
            #"{"clientSessionToken":"","userJwt":"jwt-1","endUserId":"label"}"#,
        ])
    func totpRequired(data: String) throws {
        let outcome = try F.api().decodeGrant(
            F.response(200, #"{"data":\#(data)}"#), from: .oauthTokens, grant: Secret("g"))
        #expect(outcome == .totpRequired(TOTPStep(userJWT: Secret("jwt-1"), totpLink: nil, endUserID: "label")))
    }

    @Test("a two-factor step without endUserId has an empty label and keeps its totpLink")
    func totpLabel() throws {
        let outcome = try F.api().decodeGrant(
            F.response(200, #"{"data":{"userJwt":"jwt-1","totpLink":"otpauth://totp/P?secret=ABC"}}"#),
            from: .oauthTokens, grant: Secret("g"))
        guard case .totpRequired(let step) = outcome else { Issue.record("expected a two-factor step"); return }
        #expect(step.endUserID == "")
        #expect(step.totpLink == Secret("otpauth://totp/P?secret=ABC"))
        #expect(String(describing: step) == "TOTPStep(endUserID: , userJWT: <redacted>, totpLink: <redacted>)")
    }

    @Test(
        "a two-factor answer needs a non-blank session token",
        arguments: [
            #"{"data":{}}"#, #"{"data":{"clientSessionToken":""}}"#, #"{"data":{"clientSessionToken":" \n "}}"#,
            #"{"data":{"clientSessionToken":" \t "}}"#,
        ])
    func totpAnswerMalformed(body: String) throws {
        let error = F.thrown {
            try F.api().decodeTOTP(F.response(200, body), endUserID: "u", code: Secret("123456"), userJWT: Secret("j"))
        }
        #expect(error == .malformedResponse(.totpValidations, missing: "clientSessionToken"))
    }

    @Test("a two-factor answer's end user is the one from the userJwt; other fields may be absent")
    func totpAnswer() throws {
        let session = try F.api().decodeTOTP(
            F.response(200, #"{"data":{"clientSessionToken":"totp-session-token"}}"#),
            endUserID: "user-from-jwt", code: Secret("123456"), userJWT: Secret("j"))
        #expect(session == AuthenticatedSession(token: Secret("totp-session-token"), endUserID: "user-from-jwt"))
        let record = session.portalSession(authEnvironmentID: "env-1", at: 1000)
        #expect(
            record.payload.text
                == #"""
                {"clientSessionToken":"totp-session-token","endUserId":"user-from-jwt","issuedAt":1000,\#
                "lastActivityAt":1000}
                """#
        )
    }
}

/// docs/portal-api.md, "Errors" and (docs/exit-codes.md, "The codes"): status mapping.
@Suite("Client Auth errors")
struct ClientAuthErrorTests {
    typealias F = ClientAuthFixture

    static func check(
        _ status: Int, _ body: String, _ endpoint: ClientAuthEndpoint, accountAbstracted: Bool? = nil,
        privateValues: [Secret] = []
    ) throws -> ClientAuthError? {
        let api = try F.api(accountAbstracted: accountAbstracted)
        return F.thrown { try api.check(F.response(status, body), endpoint, privateValues: privateValues) }
    }

    @Test("429 on magic links is rate limiting, with the message docs/portal-api.md gives")
    func rateLimited() throws {
        let error = try Self.check(429, "", .magicLinks)
        #expect(error == .rateLimited)
        #expect(error?.message == "too many links were sent to this address; wait a minute")
        #expect(error?.exitCode == .rejected)
    }

    @Test(
        "a 400 with a string error is account abstraction only when it was asked for",
        arguments: [
            (
                ClientAuthEndpoint.magicLinks, Bool?.some(true), #"{"error":"AA off"}"#,
                ClientAuthError.accountAbstractionUnavailable("AA off")
            ),
            (.oauthURLs, true, #"{"error":"AA off"}"#, .accountAbstractionUnavailable("AA off")),
            (
                .magicLinks, false, #"{"error":"AA off"}"#,
                .clientError(.magicLinks, status: 400, serverMessage: "AA off")
            ),
            (
                .oauthURLs, nil, #"{"error":"redirectUrl is not allow-listed"}"#,
                .clientError(.oauthURLs, status: 400, serverMessage: "redirectUrl is not allow-listed")
            ),
            (.magicLinks, true, #"{"error":42}"#, .clientError(.magicLinks, status: 400, serverMessage: nil)),
            (.magicLinks, true, "<html>", .clientError(.magicLinks, status: 400, serverMessage: nil)),
            (
                .magicLinkValidations, true, #"{"error":"token already used"}"#,
                .clientError(.magicLinkValidations, status: 400, serverMessage: "token already used")
            ),
        ])
    func accountAbstraction(endpoint: ClientAuthEndpoint, requested: Bool?, body: String, expected: ClientAuthError)
        throws
    {
        #expect(try Self.check(400, body, endpoint, accountAbstracted: requested) == expected)
    }

    @Test("account-abstraction text is cut to 200 Characters and shown on one line")
    func accountAbstractionBound() throws {
        let long = String(repeating: "é", count: 300)
        #expect(
            try Self.check(400, #"{"error":"\#(long)"}"#, .magicLinks, accountAbstracted: true)
                == .accountAbstractionUnavailable(String(repeating: "é", count: 200)))
        let error = try Self.check(400, #"{"error":"line\nbreak\u001b[2J"}"#, .magicLinks, accountAbstracted: true)
        #expect(error?.message.contains("\n") == false)
        #expect(error?.message.contains("\u{1B}") == false)
    }

    @Test(
        "401 is unauthorized everywhere: a configuration problem before a grant exists, a refusal after",
        arguments: [
            (ClientAuthEndpoint.methods, ExitCode.usage), (.magicLinks, .usage), (.oauthURLs, .usage),
            (.magicLinkValidations, .rejected), (.oauthTokens, .rejected), (.totpValidations, .rejected),
        ])
    func unauthorized(endpoint: ClientAuthEndpoint, exitCode: ExitCode) throws {
        let error = try Self.check(401, #"{"error":"Unauthorized"}"#, endpoint)
        #expect(error == .unauthorized(endpoint))
        #expect(error?.exitCode == exitCode)
    }

    @Test("a 401 on sending a magic link says which settings Portal did not accept")
    func unauthorizedSend() throws {
        let error = try #require(try Self.check(401, "", .magicLinks))
        #expect(error.message.contains("redirect URL, sender or template"))
        #expect(error.hint?.contains("byte for byte") == true)
    }

    @Test(
        "5xx is a server failure (exit 5); 3xx is unexpected; other 4xx a refusal",
        arguments: [
            (500, ClientAuthError.serverError(.oauthTokens, status: 500), ExitCode.network),
            (503, .serverError(.oauthTokens, status: 503), .network),
            (302, .unexpectedStatus(.oauthTokens, status: 302), .rejected),
            (404, .clientError(.oauthTokens, status: 404, serverMessage: nil), .rejected),
            (429, .clientError(.oauthTokens, status: 429, serverMessage: nil), .rejected),
        ])
    func statuses(status: Int, expected: ClientAuthError, exitCode: ExitCode) throws {
        let error = try Self.check(status, "", .oauthTokens)
        #expect(error == expected)
        #expect(error?.exitCode == exitCode)
    }

    @Test(
        "Portal's text is dropped when it repeats something private from the request, or a URL",
        arguments: [
            #"{"error":"no such grant grant-abc"}"#, #"{"error":"bad address USER@example.com"}"#,
            #"{"error":"not allowed: myapp://auth/callback"}"#, #"{"error":"see https://example.com"}"#,
        ])
    func scrubbed(body: String) throws {
        let error = try Self.check(
            400, body, .magicLinkValidations,
            privateValues: [Secret("grant-abc"), Secret("user@example.com")])
        #expect(error == .clientError(.magicLinkValidations, status: 400, serverMessage: nil))
    }

    @Test("a rejected code is retryable with the same userJwt; a spent grant is not")
    func retryable() {
        #expect(
            ClientAuthError.clientError(.totpValidations, status: 400, serverMessage: "invalid code").isRejectedCode)
        #expect(ClientAuthError.unauthorized(.totpValidations).isRejectedCode)
        #expect(!ClientAuthError.clientError(.oauthTokens, status: 400, serverMessage: nil).isRejectedCode)
        #expect(!ClientAuthError.serverError(.totpValidations, status: 500).isRejectedCode)
    }

    static let everyError: [ClientAuthError] = [
        .invalidArgument(.authEnvironmentID), .invalidArgument(.redirectURL), .invalidArgument(.email),
        .invalidArgument(.totpCode),
        .argumentNotOneLine(.authEnvironmentID),
        .magicLinkNotConfigured(missing: [.magicLinkFromEmail, .magicLinkTemplateID]),
        .magicLinkNotConfigured(missing: [.magicLinkTemplateID]), .methodUnavailable(.google),
        .authenticationFailed("oauth_failed"),
        .authenticationFailed(""), .rateLimited, .accountAbstractionUnavailable("x"), .invalidGrantResponse,
        .invalidUserJWT(.malformed), .malformedResponse(.methods, missing: "data"), .unauthorized(.magicLinks),
        .unauthorized(.oauthTokens), .clientError(.oauthTokens, status: 400, serverMessage: "token already used"),
        .clientError(.totpValidations, status: 400, serverMessage: "invalid code"), .serverError(.methods, status: 503),
        .unexpectedStatus(.methods, status: 302), .network(.cannotConnect(host: "api.portalhq.io")),
        .apiHostRefusesBearer,
    ]

    @Test("every message follows git's grammar: lowercase start, one line, no full stop", arguments: everyError)
    func grammar(error: ClientAuthError) {
        let message = error.message
        #expect(!message.isEmpty)
        #expect(!message.hasSuffix("."))
        #expect(!message.contains("\n"))
        let first = message.unicodeScalars.first!
        // Proper nouns (Portal) may start a message; nothing else is capitalised.
        #expect(!first.properties.isUppercase || message.hasPrefix("Portal"), "\(message)")
        if let hint = error.hint {
            #expect(!hint.hasSuffix("."))
            #expect(!hint.contains("\n"))
        }
    }

    @Test(
        "configuration problems are usage errors (exit 2)",
        arguments: [
            ClientAuthError.invalidArgument(.authEnvironmentID), .invalidArgument(.redirectURL),
            .invalidArgument(.email),
            .invalidArgument(.totpCode), .magicLinkNotConfigured(missing: [.magicLinkFromEmail]),
            .argumentNotOneLine(.redirectURL),
        ])
    func usage(error: ClientAuthError) {
        #expect(error.exitCode == .usage)
    }

    @Test("transport failures are network errors (exit 5) with the transport's message")
    func network() throws {
        let transport = ScriptedTransport(failing: .cannotConnect(host: "api.portalhq.io"))
        let error = F.thrown { try F.client(transport).methods() }
        #expect(error == .network(.cannotConnect(host: "api.portalhq.io")))
        #expect(error?.exitCode == .network)
        #expect(error?.message == "could not connect to api.portalhq.io")
    }
}

/// See docs/portal-api.md, "Email addresses"; docs/settings.md, "Settings Portal sign-in checks"; docs/portal-api.md,
/// "Two-factor codes and enrollment".
@Suite("Client Auth inputs")
struct ClientAuthInputTests {
    typealias F = ClientAuthFixture

    @Test("the environment is checked first, then the redirect URL; both are trimmed")
    func configuration() throws {
        #expect(
            F.thrown { try ClientAuthConfiguration(authEnvironmentID: " ", redirectURL: "") }
                == .invalidArgument(.authEnvironmentID))
        #expect(
            F.thrown { try ClientAuthConfiguration(authEnvironmentID: "", redirectURL: "myapp://cb") }
                == .invalidArgument(.authEnvironmentID))
        let blankRedirect = try ClientAuthConfiguration(authEnvironmentID: "env", redirectURL: " \n")
        #expect(F.thrown { try blankRedirect.requireRedirectURL() } == .invalidArgument(.redirectURL))
        let configured = try ClientAuthConfiguration(
            authEnvironmentID: " env-1\n", redirectURL: "  myapp://auth/callback \n")
        #expect(configured.authEnvironmentID == "env-1")
        #expect(try configured.requireRedirectURL() == "myapp://auth/callback")
        #expect(configured.accountAbstracted == nil)
        #expect(
            F.thrown { try ClientAuthConfiguration(authEnvironmentID: "env\r\nX-Evil: 1", redirectURL: nil) }
                == .argumentNotOneLine(.authEnvironmentID))
    }

    @Test("configuration comes from the settings, with account abstraction unset by default")
    func fromSettings() throws {
        let settings = Settings(
            flags: ["env": "env-1", "account-abstracted": "true"],
            environment: ["PORTAL_REDIRECT_URL": "myapp://cb", "PORTAL_MAGIC_LINK_FROM_EMAIL": "a@b.c"])
        let configuration = try ClientAuthConfiguration(settings: settings)
        #expect(configuration.accountAbstracted == true)
        #expect(configuration.redirectURL == "myapp://cb")
        #expect(
            F.thrown { try configuration.requireMagicLink() }
                == .magicLinkNotConfigured(missing: [.magicLinkTemplateID]))
        #expect(try ClientAuthConfiguration(settings: Settings(flags: ["env": "e"])).accountAbstracted == nil)
        #expect(throws: SettingError.self) {
            try ClientAuthConfiguration(settings: Settings(flags: ["env": "e", "account-abstracted": "maybe"]))
        }
    }

    @Test("magic links need both the sender and the template, before any request")
    func magicLinkConfig() throws {
        let transport = ScriptedTransport(status: 200, json: "{}")
        let api = ClientAuthAPI(
            configuration: try F.configuration(from: nil, template: " "), apiBase: try PortalAPIBase(),
            builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: try PortalAPIBase()), version: "1"))
        let error = F.thrown { try ClientAuthClient(api: api, transport: transport).sendMagicLink(email: "a@b.c") }
        #expect(error == .magicLinkNotConfigured(missing: [.magicLinkFromEmail, .magicLinkTemplateID]))
        #expect(
            error?.message
                == """
                magic-link sign-in is not configured: PORTAL_MAGIC_LINK_FROM_EMAIL and \
                PORTAL_MAGIC_LINK_TEMPLATE_ID are not set
                """
        )
        #expect(transport.requests.isEmpty)
    }

    @Test(
        "an email address is trimmed and lowercased",
        arguments: [
            ("  User@Example.COM \n", "user@example.com"), ("a@b.c", "a@b.c"),
        ])
    func email(input: String, expected: String) throws {
        #expect(try EmailAddress.normalize(input) == Secret(expected))
    }

    @Test("a blank email address is refused with no request", arguments: ["", "   ", "\n\t"])
    func blankEmail(input: String) throws {
        let transport = ScriptedTransport(status: 200, json: "{}")
        #expect(F.thrown { try F.client(transport).sendMagicLink(email: input) } == .invalidArgument(.email))
        #expect(transport.requests.isEmpty)
    }

    @Test("the magic link goes to the normalised address")
    func sendsNormalised() throws {
        let transport = ScriptedTransport(status: 200, json: #"{"data":{"sent":true}}"#)
        try F.client(transport).sendMagicLink(email: "  User@Example.COM \n")
        #expect(F.body(transport.requests[0])?["email"] == .string("user@example.com"))
    }

    @Test(
        "a code is six ASCII digits once trimmed",
        arguments: [("777870", "777870"), (" 000000\n", "000000"), ("123456", "123456")])
    func code(input: String, expected: String) throws {
        #expect(try TOTPCode.validate(input) == Secret(expected))
    }

    @Test(
        "anything else is refused before sending",
        arguments: ["", "   ", "12345", "1234567", "12345a", "123 456", "١٢٣٤٥٦", "+12345", "12345\u{0}"])
    func badCode(input: String) throws {
        #expect(F.thrown { try TOTPCode.validate(input) } == .invalidArgument(.totpCode))
    }

    @Test(
        "a bad userJwt is refused before the code is even checked, with no request",
        arguments: ["not-a-jwt", "", "   "])
    func badJWTFirst(jwt: String) throws {
        let transport = ScriptedTransport(status: 200, json: "{}")
        let error = F.thrown { try F.client(transport).verifyTOTP(code: "777870", userJWT: Secret(jwt)) }
        #expect(error == .invalidUserJWT(.malformed))
        #expect(transport.requests.isEmpty)
        let noEndUser = F.thrown {
            try F.client(transport).verifyTOTP(
                code: "777870", userJWT: Secret(JWTFixture.token(claims: #"{"nonce":"n"}"#)))
        }
        #expect(noEndUser == .invalidUserJWT(.missingEndUserID))
        #expect(transport.requests.isEmpty)
    }

    @Test("a verified code signs in as the userJwt's end user")
    func verifies() throws {
        let transport = ScriptedTransport(status: 200, json: #"{"data":{"clientSessionToken":"totp-session-token"}}"#)
        let session = try F.client(transport).verifyTOTP(
            code: "777870", userJWT: JWTFixture.userJWT(endUserID: "user-from-jwt"))
        #expect(session.endUserID == "user-from-jwt")
        #expect(session.token == Secret("totp-session-token"))
        #expect(transport.requests.count == 1)
    }

    static let secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

    @Test(
        "the enrollment secret is read from a totpLink",
        arguments: [
            "otpauth://totp/Portal:user?secret=\(secret)&issuer=Portal",
            "otpauth://totp/Portal:user?issuer=Portal&secret=\(secret)",
            "otpauth://totp/Portal%3Auser%40example.com?secret=\(secret)&issuer=Portal",
            "otpauth%3A%2F%2Ftotp%2FPortal%3Fsecret%3D\(secret)",
            "otpauth://totp/Portal?secret=\(secret.lowercased())",
            "OTPAUTH://totp/Portal?secret=\(secret)",
            "  otpauth://totp/Portal?secret=\(secret)\n",
            "otpauth://totp/Portal?secret=\(secret)#frag",
            "otpauth://totp/Portal?secret=AAAA&secret=\(secret)",
        ])
    func enrollmentSecret(link: String) {
        #expect(TOTPEnrollment.secret(in: Secret(link)) == Secret(Self.secret))
    }

    @Test("padding is kept")
    func padded() {
        #expect(
            TOTPEnrollment.secret(in: Secret("otpauth://totp/P?secret=\(Self.secret)===="))
                == Secret(Self.secret + "===="))
    }

    @Test(
        "no secret comes from anything else",
        arguments: [
            "", "   ", "otpauth://totp/Portal?issuer=Portal", "otpauth://totp/Portal?secret=",
            "otpauth://totp/Portal?secret=not-base32!!", "https://example.com?secret=\(secret)", secret,
            "otpauth://totp/Portal?secret=====", "otpauth://totp/Portal?secret=AB=C",
        ])
    func noSecret(link: String) {
        #expect(TOTPEnrollment.secret(in: Secret(link)) == nil)
    }

    @Test("no link, no secret")
    func noLink() {
        #expect(TOTPEnrollment.secret(in: nil) == nil)
    }
}
