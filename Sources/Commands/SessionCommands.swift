import Basics
import Glibc
import Operations
import PortalTokenCore

/// Follows a command's own text, after the blank line that separates them.
let sessionSettings = """

    Settings: --env ID (PORTAL_AUTH_ENVIRONMENT_ID), --api-host HOST
    (PORTAL_API_HOST).
    """

struct StatusCommand: Command {
    static let name = "status"
    static let summary = "Show the Portal session: end user, environment, backend and expiry"
    static let details = """
        Shows whether a session is stored, for which end user, the environment and
        why it was chosen (a setting, the directory's binding, the named default, the
        one remembered account, or the one stored session: see accounts), the backend
        in use and why (the keyring as secret-service on PROVIDER), when the session
        was issued, when it expires and its 7-day cap, a two-factor step waiting for
        verify-totp, whether the other store also holds items (see migrate), and the
        setting that rules prompts out, when one does (GIT_TERMINAL_PROMPT=0,
        credential.interactive): then only what is stored answers.

        Never prints the token and makes no network call: it compares the stored
        record with the clock. expires-at slides forward with every request Portal
        accepts; past it the next use asks Portal; past the 7-day cap the session has
        ended. Exit 1 when not signed in or the session has ended.

        --format json: signedIn, authEnvironmentId, authEnvironmentChosenBy, backend,
        provider (the keyring's provider, or null), backendReason,
        twoFactorStepWaiting and promptsRuledOutBy (the setting, or null); with a
        session also endUserId, issuedAt, expiresAt and capAt (RFC 3339, or null),
        ended and nextUseAsksPortal; twoFactorStep {endUserId, expiresAt} when a step
        waits; otherStore when the other store holds items.

        """ + sessionSettings

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        // In client mode the report is the agent's, rendered here as a local run renders its own.
        let report = try context.agent().map { try $0.statusReport(context) } ?? Status.run(context)
        context.streams.print(json ? JSONValue.object(report).serialized : Self.text(report))
        if report["signedIn"]?.boolValue != true { throw SilentExit(code: .notSignedIn) }
    }

    /// The report as lines for a terminal. Every value comes from Portal, a store, the settings
    /// or the agent: none reaches the terminal with a control character in it.
    static func text(_ report: [String: JSONValue]) -> String {
        let show = { (name: String) in TerminalText.escaped(report[name]?.stringValue ?? "") }
        let backend =
            show("backend") + (report["provider"]?.stringValue.map { " on \(TerminalText.escaped($0))" } ?? "")
        let context = [
            "  environment:  \(show("authEnvironmentId"))", "  chosen by:    \(show("authEnvironmentChosenBy"))",
            "  backend:      \(backend) (\(show("backendReason")))",
        ]
        var lines: [String] = []
        if report["endUserId"]?.stringValue != nil {
            let time = { (name: String) in
                report[name]?.stringValue.map { TerminalText.escaped($0) }
                    ?? "unknown (checked with Portal on next use)"
            }
            if report["ended"]?.boolValue == true {
                lines.append("the session of \(show("endUserId")) has ended: it passed its 7-day cap")
            } else if report["nextUseAsksPortal"]?.boolValue == true {
                lines.append("signed in as \(show("endUserId")) (idle past expires-at: the next use asks Portal)")
            } else {
                lines.append("signed in as \(show("endUserId"))")
            }
            lines +=
                context + [
                    "  issued at:    \(time("issuedAt"))",
                    "  expires at:   \(time("expiresAt")) (slides with each accepted request)",
                    "  7-day cap:    \(time("capAt"))",
                ]
        } else {
            lines += ["not signed in"] + context
        }
        if let step = report["twoFactorStep"] {
            let user = TerminalText.escaped(step["endUserId"]?.stringValue ?? "")
            let before = TerminalText.escaped(step["expiresAt"]?.stringValue ?? "")
            lines.append(
                "  two-factor:   a step for \(user) is waiting; run 'portal-token verify-totp' before \(before)")
        }
        if let setting = report["promptsRuledOutBy"]?.stringValue {
            lines.append(
                "  prompts:      none: \(TerminalText.escaped(setting)) rules them out; only what is stored answers")
        }
        if report["otherStore"]?.stringValue != nil { lines.append("  note:         \(show("otherStore"))") }
        return lines.joined(separator: "\n")
    }
}

struct LogoutCommand: Command {
    static let name = "logout"
    static let auditOperation: AuditOperation? = .logout
    static let summary = "Delete the stored Portal session (never runs the hook)"
    static let details = """
        Deletes the chosen account's session: with --end-user ID, that end user's;
        naming none, the one it would serve, and no other end user's. Also forgets what
        sign-ins left behind, a waiting two-factor step and the memory of redirects
        already exchanged, so a sign-in link opened again goes to Portal (which
        refuses a spent one), and forgets the account; directories bound to it stay
        bound. Exit 0 also when no session was stored.

        """ + sessionSettings

    init(arguments: ParsedArguments) throws(CLIError) {}

    static let isRefusedInClientMode = true

    func run(in context: Context) throws {
        let account = try context.accountChoice()
        let environmentID = account.authEnvironmentID
        let sessions = try context.sessionService()
        let steps = try context.twoFactorSteps()
        // Under the sign-in lock: a sign-in finishing right now is removed after its write, not before.
        // The end user signed out: the one named, else the one whose session is served.
        var endUser = account.endUserID
        let removed = try context.signInLock().withLock {
            if endUser == nil { endUser = try sessions.restore()?.endUserID }
            let removed = try sessions.remove()
            try SignInService.forget(
                authEnvironmentID: environmentID, steps: steps, memory: context.services.secretCache())
            return removed
        }
        context.forgetAccount(environmentID, endUserID: endUser)
        if removed {
            context.streams.printError("portal-token: signed out of environment '\(environmentID)'")
        } else {
            context.audit?.outcome = .notFound
            context.streams.printError("portal-token: no session was stored for environment '\(environmentID)'")
        }
    }
}

struct RefreshCommand: Command {
    static let name = "refresh"
    static let auditOperation: AuditOperation? = .refresh
    static let summary = "Ask Portal whether the session is live, and slide its expiry"
    static let details = """
        Sends one authenticated GET /api/v3/clients/me and says on stderr when the
        session now expires. On success the expiry slides; on HTTP 401 the session
        ends, the on-session-invalidated hook runs, and the exit status is 3; another
        non-2xx status is exit 6. Exit 1 when not signed in.

        """ + sessionSettings

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        context.audit?.method = "GET"
        if let agent = try context.agent() {
            // The agent's proxy sends it with the session, slides the expiry, or ends the session.
            let response = try agent.portal("GET", SessionService.validationPath, body: nil, headers: [])
            guard response.isSuccess else {
                throw rejection(response, method: "GET", path: SessionService.validationPath, agent: agent)
            }
            let status = try agent.sessionStatus(context)
            context.streams.printError(
                "portal-token: the session of \(TerminalText.escaped(status.endUserID)) is live; it expires at "
                    + TerminalText.escaped(status.expiresAt ?? "unknown"))
            return
        }
        let (session, response) = try context.sessionService().refresh()
        context.audit?.httpStatus = response.status
        guard response.isSuccess else { throw rejection(response, method: "GET", path: SessionService.validationPath) }
        let expiry = session.expiresAt.map(RFC3339.format) ?? "unknown"
        context.streams.printError("portal-token: the session of \(session.endUserID) is live; it expires at \(expiry)")
    }
}

struct APICommand: Command {
    static let name = "api"
    static let auditOperation: AuditOperation? = .api
    static let summary = "Send an authenticated request to the Portal API and print the response"
    static let details = """
        PATH is a path such as /api/v3/clients/me (without its leading slash it is the
        same path, as gh api takes it), or a URL on the configured API host; a URL on
        any other origin is refused (exit 2) before a request is built, so the session
        token goes to no other origin. In client mode (PORTAL_TOKEN_AGENT_SOCK) PATH
        must be a path: the agent sends it to its own API host. A -- before PATH ends
        the options; a space or control character in PATH is a usage error (exit 2):
        percent-encode it (%20).

        The response body goes to stdout, ending with a newline, as with gh api. A 2xx
        answer slides the expiry; any other status is reported on stderr with exit 6;
        HTTP 401 ends the session (exit 3).

        -X: the method is uppercased; one that is not letters only is exit 2.

        --data: the body must be JSON; from @FILE or @- it holds at most 8 MiB.

        -H: may be repeated. The headers portal-token sets itself (Authorization,
        Host, Accept, Content-Type, Content-Length, User-Agent, X-Portal-Trace-Id) are
        refused (exit 2), as is a value with a line break or NUL.

        """ + sessionSettings

    let method: String
    let path: String
    let data: String?
    let headers: [HTTPHeader]

    init(arguments: ParsedArguments) throws(CLIError) {
        let method = arguments.value(.method)
        data = arguments.value(.data)
        var headers: [HTTPHeader] = []
        for header in arguments.values(.header) { headers.append(try Self.header(header)) }
        self.headers = headers
        guard let path = arguments.operands.first else {
            throw .usage("'api' needs a PATH", hint: "see 'portal-token api --help'")
        }
        // Spaces and control characters would split or end the request line (RFC 9112 §3).
        guard !path.isEmpty, !path.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) else {
            throw .usage(
                "the API path holds a space or a control character", hint: "percent-encode it, e.g. %20 for a space")
        }
        // A path without its leading slash is the same path, as gh api takes it; a URL keeps its
        // own form, and resolving it against the API host decides whether the token may go there.
        self.path = path.hasPrefix("/") || path.firstByteRange(of: "://") != nil ? path : "/" + path
        self.method = (method ?? (data == nil ? "GET" : "POST")).uppercased()
        guard !self.method.isEmpty, self.method.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else {
            throw .usage("-X takes an HTTP method such as GET or POST")
        }
    }

    /// `Name: value`: the name an RFC 9110 token, the value without CR, LF or NUL. The value
    /// is not repeated in messages: it may be private.
    static func header(_ text: String) throws(CLIError) -> HTTPHeader {
        guard let colon = text.firstIndex(of: ":") else {
            throw .usage("-H takes 'Name: value'", hint: "for example -H 'X-Request-Id: 42'")
        }
        let name = String(text[..<colon])
        let value = String(text[text.index(after: colon)...]).trimmingWhitespace
        let tokenSymbols = Array("!#$%&'*+-.^_`|~".utf8)
        let isTokenByte = { (byte: UInt8) in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a)
                || tokenSymbols.contains(byte)
        }
        guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
            throw .usage(
                "-H takes 'Name: value', and the name is not a header name", hint: "for example -H 'X-Request-Id: 42'")
        }
        if PortalRequestBuilder.ownedHeaderNames.contains(name.lowercased()) {
            throw .usage("-H cannot set \(name): portal-token sets it itself")
        }
        guard !value.utf8.contains(where: { $0 == 0x0d || $0 == 0x0a || $0 == 0 }) else {
            throw .usage("-H: the value of \(name) holds a line break or NUL")
        }
        return HTTPHeader(name, value)
    }

    func run(in context: Context) throws {
        let body = try data.map { try readBody($0, context) }
        context.audit?.method = method
        let response: HTTPResponse
        if let agent = try context.agent() {
            // The agent sends it to its own API host: a path is all it takes.
            guard path.hasPrefix("/") else {
                throw CLIError.usage(
                    "through the agent at \(agent.socketPath), api takes a path such as /api/v3/clients/me, not a URL",
                    hint: "the agent sends the request to its own API host")
            }
            response = try agent.portal(method, path, body: body, headers: headers)
            if response.status == 401 { throw rejection(response, method: method, path: pathForMessages, agent: agent) }
        } else if case let apiBase = try context.apiBase(), let marker = context.ownProxyMarker(apiBase) {
            response = try throughProxy(apiBase, marker: marker, body: body, context)
        } else {
            response = try context.sessionService().api(method: method, path: path, body: body, headers: headers)
        }
        context.audit?.httpStatus = response.status
        context.streams.write(response.body, to: context.streams.output)
        // Like gh api: the output ends with a newline, so a shell prompt starts on its own line.
        if let last = response.body.last, last != UInt8(ascii: "\n") {
            context.streams.write([UInt8(ascii: "\n")], to: context.streams.output)
        }
        guard response.isSuccess else {
            throw rejection(response, method: method, path: pathForMessages)
        }
    }

    /// Under `exec --proxy` (or a shell that took `proxy --listen`'s lines), the request goes to the
    /// proxy with its header and no bearer: the session stays with the proxy, which adds the
    /// token, slides the expiry, and ends the session on a 401 (docs/proxy.md, "portal-token
    /// under the proxy").
    private func throughProxy(
        _ apiBase: PortalAPIBase, marker: HTTPHeader, body: [UInt8]?, _ context: Context
    ) throws -> HTTPResponse {
        guard let url = apiBase.resolve(path) else { throw SessionError.foreignOrigin }
        let requests = PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: Release.version)
        let request = requests.request(method, url, body: body, extraHeaders: headers + [marker])
        let response: HTTPResponse
        do {
            response = try context.transport().send(request)
        } catch let error as HTTPError {
            throw SessionError.network(error)
        }
        if response.status == 401 {
            throw CLIError(
                "Portal answered HTTP 401 to \(method) \(pathForMessages) through the proxy: the session has ended",
                hint: "the proxy ended the session and ran the hook; sign in again", exitCode: .sessionEnded)
        }
        return response
    }

    /// The path without its query, for messages: a query may carry something private.
    private var pathForMessages: String {
        String(path.prefix { $0 != "?" && $0 != "#" })
    }

    /// The most a request body may hold, from a file or from stdin: an endless stream
    /// (`yes | portal-token api -d @- …`) is refused rather than read for ever.
    static let maximumBodyBytes = 8 << 20

    private func readBody(_ data: String, _ context: Context) throws -> [UInt8] {
        var bytes: [UInt8]
        if data == "@-" {
            bytes = context.streams.readAll(limit: Self.maximumBodyBytes)
            guard bytes.count <= Self.maximumBodyBytes else {
                throw CLIError.usage(
                    """
                    cannot read the request body from stdin: \
                    \(FileReading.Failure.tooLarge.described(limit: Self.maximumBodyBytes))
                    """
                )
            }
        } else if data.hasPrefix("@") {
            let file = String(data.dropFirst())
            do {
                bytes = try FileReading.contents(of: file, limit: Self.maximumBodyBytes, regularOnly: false)
            } catch {
                throw CLIError.usage(
                    """
                    cannot read the request body from \(file): \
                    \(error.described(limit: Self.maximumBodyBytes))
                    """
                )
            }
        } else {
            bytes = Array(data.utf8)
        }
        guard (try? JSONValue.parse(bytes)) != nil else {
            throw CLIError.usage(
                "the request body is not JSON", hint: "give a JSON document with --data, or --data @FILE")
        }
        return bytes
    }
}

/// A non-2xx answer from Portal: exit 6, naming the status and the request, never the body. A
/// 401 through the agent is the end of its session, which the agent has ended (exit 3).
private func rejection(_ response: HTTPResponse, method: String, path: String, agent: AgentConnection? = nil)
    -> CLIError
{
    if response.status == 401, let agent {
        return CLIError(
            "Portal answered HTTP 401 to \(method) \(path) through the agent at \(agent.socketPath): "
                + "the session has ended",
            hint: "the agent ended the session and ran its hook; sign in again on the agent's host",
            exitCode: .sessionEnded)
    }
    return CLIError("Portal answered HTTP \(response.status) to \(method) \(path)", exitCode: .rejected)
}
