import Foundation
import PortalTokenCore
import Synchronization

/// Portal's six Client Auth endpoints (docs/portal-api.md, "The Client Auth endpoints") on a `FakePortalServer`, with a
/// fake OAuth provider and a magic-link outbox, strict about what the client sends:
///
/// - every call must carry `x-portal-auth-environment-id` (missing: a violation and 400; another
///   environment: 401, as Portal answers an unknown one);
/// - no call may carry `Authorization` except `POST /totps/validations`, which must carry
///   `Bearer <userJwt>` (the server's header rules);
/// - `redirectUrl` in `GET /oauth/urls` must be encoded exactly as docs/portal-api.md, "Form encoding", says (checked
///   by re-encoding it here independently), and must be on the allow-list byte for byte (else 401);
/// - bodies must have exactly the keys docs/portal-api.md lists; the email must already be trimmed and
///   lowercased.
///
/// Grants are single-use: a second exchange of a spent grant answers 400
/// `{"error":"token already used"}`; a grant never issued (or taken to the other exchange
/// endpoint) answers 401. Two-factor codes are retryable: a wrong code answers 400
/// `{"error":"invalid code"}` and the same `userJwt` stays usable until a code is accepted.
public final class FakeClientAuth: Sendable {
    public enum MagicLinkBehaviour: Sendable {
        /// Records the link it "emails".
        case send
        /// 429, as Portal answers too many links to one address.
        case rateLimited
        /// 401, as Portal answers a redirect URL, sender or template it does not accept.
        case unauthorized
    }

    /// Who signs in when a grant is issued.
    public struct EndUser: Sendable, Equatable {
        public var id: String
        public var clientID: String
        /// nil: the grant exchange answers with a session. Otherwise the exchange answers with a
        /// `userJwt`, and this code completes it.
        public var totpCode: String?
        /// With `totpCode`: the exchange also sends a `totpLink`, as for first enrollment.
        public var enrolling: Bool

        public init(id: String, clientID: String = "client-1", totpCode: String? = nil, enrolling: Bool = false) {
            self.id = id
            self.clientID = clientID
            self.totpCode = totpCode
            self.enrolling = enrolling
        }
    }

    public struct Options: Sendable {
        public var authEnvironmentID: String
        /// The allow-list: redirect URLs Portal accepts, compared byte for byte.
        public var redirectURLs: [String]
        /// What `/methods` lists (unknown values are allowed: clients must drop them).
        public var allowedMethods: [String]
        public var autoCreateWallet: Bool
        /// Providers that have an authorize URL in `/oauth/urls`.
        public var providers: Set<AuthMethod>
        /// Sender and template `/magic-links` accepts; nil accepts any.
        public var magicLinkFromEmail: String?
        public var magicLinkTemplateID: String?
        public var magicLinkBehaviour: MagicLinkBehaviour
        /// When false, a request asking for account abstraction gets 400 with an `error` string.
        public var accountAbstractionAvailable: Bool
        public var endUser: EndUser
        /// When set, the fake provider sends the browser back with `error=` this instead of a grant.
        public var providerError: String?
        /// Appends each magic link "sent" to this file, one a line, for a person trying flows by hand.
        public var outboxPath: String?

        public init(
            authEnvironmentID: String = "env-test", redirectURLs: [String],
            allowedMethods: [String] = ["EMAIL_MAGIC_LINK", "GOOGLE", "APPLE"],
            autoCreateWallet: Bool = false, providers: Set<AuthMethod> = [.google, .apple],
            magicLinkFromEmail: String? = nil, magicLinkTemplateID: String? = nil,
            magicLinkBehaviour: MagicLinkBehaviour = .send, accountAbstractionAvailable: Bool = true,
            endUser: EndUser = EndUser(id: "end-user-1"), providerError: String? = nil, outboxPath: String? = nil
        ) {
            self.authEnvironmentID = authEnvironmentID
            self.redirectURLs = redirectURLs
            self.allowedMethods = allowedMethods
            self.autoCreateWallet = autoCreateWallet
            self.providers = providers
            self.magicLinkFromEmail = magicLinkFromEmail
            self.magicLinkTemplateID = magicLinkTemplateID
            self.magicLinkBehaviour = magicLinkBehaviour
            self.accountAbstractionAvailable = accountAbstractionAvailable
            self.endUser = endUser
            self.providerError = providerError
            self.outboxPath = outboxPath
        }
    }

    /// A magic link the fake "emailed".
    public struct SentLink: Sendable, Equatable {
        public var email: String
        /// The configured redirect URL plus `token=<grant>&authMethod=EMAIL_MAGIC_LINK`: what
        /// the user's click delivers.
        public var link: String
        public var grant: String
    }

    private struct Grant {
        var endUser: EndUser
        var method: AuthMethod
        var spent = false
    }

    private struct PendingTOTP {
        var endUser: EndUser
        var completed = false
    }

    private struct State {
        var options: Options
        var grants: [String: Grant] = [:]
        var pending: [String: PendingTOTP] = [:]
        /// OAuth `state` → redirect URL; single-use, shared by both providers' URLs.
        var oauthStates: [String: String] = [:]
        var sentLinks: [SentLink] = []
        var exchanges = 0
        var counter = 0
        var issuedTokens: [String] = []
        var issuedUserJWTs: [String] = []
        var exchangeHook: (@Sendable () -> Void)?
    }

    public let server: FakePortalServer
    private let state: Mutex<State>

    public init(server: FakePortalServer, options: Options) {
        self.server = server
        state = Mutex(State(options: options))
        for endpoint in ClientAuthEndpoint.allCases {
            server.addRoute(
                endpoint.method, endpoint.path, bearer: endpoint == .totpValidations ? .required : .forbidden
            ) {
                [self] request, _ in handle(endpoint, request)
            }
        }
        server.addRoute("GET", Self.providerPath, bearer: .optional, isPortalAPI: false) { [self] request, _ in
            authorize(request)
        }
    }

    public static let providerPath = "/fake-oauth/authorize"

    // MARK: Configuration and inspection

    public var options: Options {
        get { state.withLock { $0.options } }
        set { state.withLock { $0.options = newValue } }
    }

    public var sentLinks: [SentLink] { state.withLock { $0.sentLinks } }

    /// How many grant exchanges Portal answered with a session or a two-factor step.
    public var acceptedExchanges: Int { state.withLock { $0.exchanges } }

    /// Every session token and `userJwt` this fake handed out, for canary checks.
    public var issuedTokens: [String] { state.withLock { $0.issuedTokens } }
    public var issuedUserJWTs: [String] { state.withLock { $0.issuedUserJWTs } }

    /// Runs `hook` after a grant is accepted and spent, before the answer leaves: a test can
    /// make the client's store fail between the exchange and its write.
    public func onAcceptedExchange(_ hook: (@Sendable () -> Void)?) {
        state.withLock { $0.exchangeHook = hook }
    }

    /// Spends a grant as if another client had exchanged it.
    public func spend(_ grant: String) {
        state.withLock { $0.grants[grant]?.spent = true }
    }

    /// Issues a grant as if the user had signed in with `method`, and returns it; for tests that
    /// deliver a redirect themselves.
    public func issueGrant(method: AuthMethod, endUser: EndUser? = nil) -> String {
        state.withLock { state in
            state.counter += 1
            let grant = "grant-\(state.counter)-\(Self.randomHex(8))"
            state.grants[grant] = Grant(endUser: endUser ?? state.options.endUser, method: method)
            return grant
        }
    }

    /// The redirect URL with the grant and method markers appended, as Portal builds it.
    public static func redirect(_ redirectURL: String, grant: String, method: AuthMethod) -> String {
        let separator = redirectURL.contains("?") ? "&" : "?"
        let marker = method == .emailMagicLink ? "authMethod=EMAIL_MAGIC_LINK" : "login_type=\(method.rawValue)"
        return redirectURL + separator + "token=" + grant + "&" + marker
    }

    /// A `userJwt` as Portal mints it: base64url header, claims naming the end user, signature.
    public static func userJWT(endUserID: String, environmentID: String) -> String {
        func segment(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let now = Int(Date().timeIntervalSince1970)
        return segment(#"{"alg":"HS256","typ":"JWT"}"#) + "."
            + segment(
                #"""
                {"endUserId":"\#(endUserID)","environmentId":"\#(environmentID)","iat":\#(now),"exp":\#(now + 600)\#
                ,"nonce":"\#(randomHex(8))"}
                """#
            )
            + "." + segment("fake-signature-\(randomHex(8))")
    }

    public static let enrollmentSecret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

    // MARK: Endpoints

    private func handle(_ endpoint: ClientAuthEndpoint, _ request: FakePortalServer.Request)
        -> FakePortalServer.Response
    {
        let options = self.options
        guard let environment = request.header(ClientAuthAPI.environmentHeader) else {
            server.recordViolation(request, "x-portal-auth-environment-id is missing")
            return .json(400, #"{"error":"fake server: x-portal-auth-environment-id is missing"}"#)
        }
        guard request.headers.contains(where: { $0.name == ClientAuthAPI.environmentHeader }) else {
            server.recordViolation(request, "x-portal-auth-environment-id is not spelled in lowercase")
            return .json(400, #"{"error":"fake server: header name case"}"#)
        }
        guard environment == options.authEnvironmentID else { return .json(401, #"{"error":"Unauthorized"}"#) }
        switch endpoint {
        case .methods: return methods(request, options)
        case .magicLinks: return sendMagicLink(request, options)
        case .magicLinkValidations: return exchange(request, method: .emailMagicLink)
        case .oauthURLs: return oauthURLs(request, options)
        case .oauthTokens: return exchange(request, method: .google)
        case .totpValidations: return validateTOTP(request)
        }
    }

    private func methods(_ request: FakePortalServer.Request, _ options: Options) -> FakePortalServer.Response {
        if request.query != nil { server.recordViolation(request, "/methods takes no query") }
        let list = options.allowedMethods.map { "\"\($0)\"" }.joined(separator: ",")
        return .json(
            200, #"{"data":{"allowedAuthMethods":[\#(list)],"autoCreateWallet":\#(options.autoCreateWallet)}}"#)
    }

    private func sendMagicLink(_ request: FakePortalServer.Request, _ options: Options) -> FakePortalServer.Response {
        guard case .object(let body)? = try? JSONValue.parse(request.body) else {
            server.recordViolation(request, "the body is not a JSON object")
            return .json(400, #"{"error":"invalid body"}"#)
        }
        let required = ["email", "redirectUrl", "fromEmail", "templateId"]
        let keys = Set(body.keys)
        if !Set(required).isSubset(of: keys) || !keys.isSubset(of: Set(required + ["isAccountAbstracted"]))
            || required.contains(where: { body[$0]?.stringValue == nil })
        {
            server.recordViolation(
                request,
                """
                the magic-link body must have exactly email, redirectUrl, fromEmail, templateId and perhaps \
                isAccountAbstracted
                """
            )
            return .json(400, #"{"error":"invalid body"}"#)
        }
        if let value = body["isAccountAbstracted"], value.boolValue == nil {
            server.recordViolation(request, "isAccountAbstracted must be a JSON boolean")
        }
        let email = body["email"]!.stringValue!
        if email != email.lowercased() || email != email.trimmingCharacters(in: .whitespacesAndNewlines) {
            server.recordViolation(request, "the email address was not trimmed and lowercased")
        }
        let redirectURL = body["redirectUrl"]!.stringValue!
        switch options.magicLinkBehaviour {
        case .rateLimited: return .json(429, #"{"error":"Too many requests"}"#)
        case .unauthorized: return .json(401, #"{"error":"Unauthorized"}"#)
        case .send: break
        }
        guard options.redirectURLs.contains(where: { $0.utf8.elementsEqual(redirectURL.utf8) }),
            options.magicLinkFromEmail.map({ $0 == body["fromEmail"]!.stringValue! }) ?? true,
            options.magicLinkTemplateID.map({ $0 == body["templateId"]!.stringValue! }) ?? true
        else {
            return .json(401, #"{"error":"Unauthorized"}"#)
        }
        if body["isAccountAbstracted"]?.boolValue == true, !options.accountAbstractionAvailable {
            return .json(400, #"{"error":"Account abstraction is not enabled for this environment"}"#)
        }
        let grant = issueGrant(method: .emailMagicLink)
        let sent = SentLink(
            email: email, link: Self.redirect(redirectURL, grant: grant, method: .emailMagicLink), grant: grant)
        state.withLock { $0.sentLinks.append(sent) }
        if let path = options.outboxPath, let handle = FileHandle(forWritingAtPath: path) ?? Self.create(path) {
            handle.seekToEndOfFile()
            handle.write(Data((sent.link + "\n").utf8))
            try? handle.close()
        }
        return .json(200, #"{"data":{"sent":true}}"#)
    }

    private static func create(_ path: String) -> FileHandle? {
        _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        return FileHandle(forWritingAtPath: path)
    }

    private func oauthURLs(_ request: FakePortalServer.Request, _ options: Options) -> FakePortalServer.Response {
        let pieces = (request.query ?? "").split(separator: "&", omittingEmptySubsequences: false).map(String.init)
        guard let first = pieces.first, first.hasPrefix("redirectUrl=") else {
            server.recordViolation(request, "the query must start with redirectUrl=")
            return .json(400, #"{"error":"redirectUrl is required"}"#)
        }
        let raw = String(first.dropFirst("redirectUrl=".count))
        guard let redirectURL = Self.formDecode(raw), Self.formEncode(redirectURL) == raw else {
            server.recordViolation(request, "redirectUrl is not form-encoded as docs/portal-api.md says")
            return .json(401, #"{"error":"Unauthorized"}"#)
        }
        var accountAbstraction: Bool?
        switch Array(pieces.dropFirst()) {
        case []: break
        case ["isAccountAbstracted=true"]: accountAbstraction = true
        case ["isAccountAbstracted=false"]: accountAbstraction = false
        default:
            server.recordViolation(request, "after redirectUrl only isAccountAbstracted=true|false may follow")
        }
        guard options.redirectURLs.contains(where: { $0.utf8.elementsEqual(redirectURL.utf8) }) else {
            return .json(401, #"{"error":"Unauthorized"}"#)
        }
        if accountAbstraction == true, !options.accountAbstractionAvailable {
            return .json(400, #"{"error":"Account abstraction is not enabled for this environment"}"#)
        }
        let oauthState = Self.randomHex(16)
        state.withLock { $0.oauthStates[oauthState] = redirectURL }
        var members: [String] = []
        for provider in [AuthMethod.google, .apple] where options.providers.contains(provider) {
            members.append(
                #"""
                "\#(provider == .google ? "google" : "apple")":"\#(server.baseURL)\#(Self.providerPath)\#
                ?provider=\#(provider.rawValue)&state=\#(oauthState)"
                """#
            )
        }
        return .json(200, #"{"data":{\#(members.joined(separator: ","))}}"#)
    }

    /// The fake provider: a browser arrives with the `state`; it is sent back to the redirect
    /// URL with a fresh grant (or `error=`).
    private func authorize(_ request: FakePortalServer.Request) -> FakePortalServer.Response {
        var parameters: [String: String] = [:]
        for piece in (request.query ?? "").split(separator: "&") {
            let parts = piece.split(separator: "=", maxSplits: 1).map(String.init)
            parameters[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        guard let provider = parameters["provider"].flatMap(AuthMethod.init(rawValue:)), provider != .emailMagicLink,
            let oauthState = parameters["state"],
            let redirectURL = state.withLock({ $0.oauthStates.removeValue(forKey: oauthState) })
        else {
            return FakePortalServer.Response(
                status: 400, headers: [HTTPHeader("Content-Type", "text/html")],
                body: Array("<p>unknown or spent state</p>".utf8))
        }
        if let error = options.providerError {
            let separator = redirectURL.contains("?") ? "&" : "?"
            return .redirect(to: redirectURL + separator + "error=" + Self.formEncode(error))
        }
        let grant = issueGrant(method: provider)
        return .redirect(to: Self.redirect(redirectURL, grant: grant, method: provider))
    }

    private func exchange(_ request: FakePortalServer.Request, method: AuthMethod) -> FakePortalServer.Response {
        guard let token = oneKey("token", request) else { return .json(400, #"{"error":"invalid body"}"#) }
        let options = self.options
        let result: FakePortalServer.Response = state.withLock { state in
            guard var grant = state.grants[token], (grant.method == .emailMagicLink) == (method == .emailMagicLink)
            else {
                return .json(401, #"{"error":"Unauthorized"}"#)
            }
            guard !grant.spent else { return .json(400, #"{"error":"token already used"}"#) }
            grant.spent = true
            state.grants[token] = grant
            state.exchanges += 1
            let endUser = grant.endUser
            if endUser.totpCode != nil {
                let jwt = Self.userJWT(endUserID: endUser.id, environmentID: options.authEnvironmentID)
                state.pending[jwt] = PendingTOTP(endUser: endUser)
                state.issuedUserJWTs.append(jwt)
                let link =
                    endUser.enrolling
                    ? #"""
                    ,"totpLink":"otpauth://totp/Portal:\#(endUser.id)?secret=\#(Self.enrollmentSecret)\#
                    &issuer=Portal"
                    """#
                    : ""
                return .json(200, #"{"data":{"endUserId":"\#(endUser.id)","userJwt":"\#(jwt)"\#(link)}}"#)
            }
            return .json(200, "")
        }
        if result.status == 200, let hook = state.withLock({ $0.exchangeHook }) { hook() }
        guard result.status == 200, result.body.isEmpty else { return result }
        // A session: the token is minted and made live for /clients/me.
        let endUser = state.withLock { $0.grants[token]!.endUser }
        return session(for: endUser, includeEndUser: true)
    }

    private func validateTOTP(_ request: FakePortalServer.Request) -> FakePortalServer.Response {
        guard let code = oneKey("code", request) else { return .json(400, #"{"error":"invalid body"}"#) }
        guard let jwt = request.bearerToken else { return .json(401, #"{"error":"Unauthorized"}"#) }
        let outcome: Result<EndUser, FakeTOTPRefusal> = state.withLock { state in
            guard let pending = state.pending[jwt], !pending.completed else { return .failure(.unauthorized) }
            guard code == pending.endUser.totpCode else { return .failure(.invalidCode) }
            state.pending[jwt]?.completed = true
            return .success(pending.endUser)
        }
        switch outcome {
        case .success(let endUser): return session(for: endUser, includeEndUser: false)
        case .failure(.unauthorized): return .json(401, #"{"error":"Unauthorized"}"#)
        case .failure(.invalidCode): return .json(400, #"{"error":"invalid code"}"#)
        }
    }

    private enum FakeTOTPRefusal: Error { case unauthorized, invalidCode }

    private func session(for endUser: EndUser, includeEndUser: Bool) -> FakePortalServer.Response {
        let token = "session-\(Self.randomHex(16))"
        server.registerLiveToken(token, clientID: endUser.clientID)
        state.withLock { $0.issuedTokens.append(token) }
        let endUserField = includeEndUser ? #""endUserId":"\#(endUser.id)","# : ""
        return .json(
            200,
            #"""
            {"data":{\#(endUserField)"clientId":"\#(endUser.clientID)","clientSessionToken":"\#(token)",\#
            "isAccountAbstracted":false}}
            """#
        )
    }

    /// The body's only key, as a string; anything else is a violation.
    private func oneKey(_ key: String, _ request: FakePortalServer.Request) -> String? {
        guard case .object(let body)? = try? JSONValue.parse(request.body), body.count == 1,
            let value = body[key]?.stringValue
        else {
            server.recordViolation(request, "the body must be {\"\(key)\": string} with no other key")
            return nil
        }
        return value
    }

    // MARK: Encoding, written apart from the client's so that the check is independent

    static func formEncode(_ text: String) -> String {
        var output = ""
        for byte in text.utf8 {
            if (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || "-_.*".utf8.contains(byte)
            {
                output.append(Character(Unicode.Scalar(byte)))
            } else {
                output += String(format: "%%%02X", byte)
            }
        }
        return output
    }

    static func formDecode(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard iterator.count >= 2,
                    let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func randomHex(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

/// A browser for tests: follows a URL on the fake server (the provider's authorize page) and
/// reports where it was sent, or visits a loopback URL (the listener). Plain HTTP on loopback.
public enum SimulatedBrowser {
    public struct Page: Sendable {
        public var status: Int
        public var headers: [HTTPHeader]
        public var body: String
        public var location: String? { headers.value(for: "Location") }
    }

    /// GET `url` (`http://host:port/target`), without following a redirect.
    /// A connection to 127.0.0.1:`port` that sends nothing yet (an idle or slow client); close it.
    public static func connect(port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw FakeServerError("browser: socket", errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let number = errno
            close(descriptor)
            throw FakeServerError("browser: connect", number)
        }
        return descriptor
    }

    public static func get(_ url: String) throws -> Page {
        guard url.hasPrefix("http://") else { throw FakeServerError("browser: not an http URL", 0) }
        let rest = url.dropFirst("http://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var target = String(rest.dropFirst(authority.count))
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        if target.isEmpty || target.first == "?" { target = "/" + target }
        let hostName = authority.split(separator: ":").first.map(String.init) ?? ""
        guard let port = authority.split(separator: ":").last.flatMap({ UInt16($0) }) else {
            throw FakeServerError("browser: the URL has no port", 0)
        }
        let descriptor = try connect(port: port)
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array(
            """
            GET \(target) HTTP/1.1\r\nHost: \(hostName):\(port)\r\nUser-Agent: simulated-browser\r\nAccept: \
            text/html\r\nConnection: close\r\n\r\n
            """
            .utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count <= 0 { break }
            response += chunk[0..<count]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw FakeServerError("browser: no response", 0) }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let headers = lines.dropFirst().compactMap { line -> HTTPHeader? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return HTTPHeader(
                String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Page(status: status, headers: headers, body: String(text[split.upperBound...]))
    }

    /// A socket listening on 127.0.0.1:`port`, as another program holding the port; close it.
    public static func listen(port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, 1) == 0 else {
            let number = errno
            close(descriptor)
            throw FakeServerError("browser: cannot listen on the port", number)
        }
        return descriptor
    }

    /// Whether nothing listens on 127.0.0.1:`port` any more.
    public static func canBind(port: UInt16) throws -> Bool {
        guard let descriptor = try? listen(port: port) else { return false }
        close(descriptor)
        return true
    }

    /// Opens a provider's authorize URL and returns where the provider sends the browser: the
    /// redirect URL with the grant (`token=…&login_type=…`) or `error=…`.
    public static func followProvider(_ authorizeURL: String) throws -> String {
        let page = try get(authorizeURL)
        guard page.status == 302, let location = page.location else {
            throw FakeServerError("browser: the provider answered \(page.status), not a redirect", 0)
        }
        return location
    }
}

/// A loopback port that nothing listens on at the moment of asking, for a loopback redirect URL
/// in a test. (Bound to port 0 and closed: another process could take it in between, which is
/// as likely as a collision of random ports.)
public func freeLoopbackPort() -> UInt16 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}
