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
        waits; otherStore when the other store holds items; fileKey, what opens the
        encrypted file in use (the passphrase, or the TPM with the passphrase to
        recover it).

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
        if report["fileKey"]?.stringValue != nil { lines.append("  file key:     \(show("fileKey"))") }
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
        let (environmentID, removed) = try Logout.run(context)
        context.streams.printError(
            removed
                ? "portal-token: signed out of environment '\(environmentID)'"
                : "portal-token: no session was stored for environment '\(environmentID)'")
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
        let live = try Refresh.run(context)
        context.streams.printError(
            "portal-token: the session of \(TerminalText.escaped(live.endUserID)) is live; it expires at "
                + TerminalText.escaped(live.expiresAt ?? "unknown"))
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
        let request = Api.Request(
            method: method, path: path, body: try data.map { try readBody($0, context) }, headers: headers)
        let response = try Api.run(request, context)
        context.streams.write(response.body, to: context.streams.output)
        // Like gh api: the output ends with a newline, so a shell prompt starts on its own line.
        if let last = response.body.last, last != UInt8(ascii: "\n") {
            context.streams.write([UInt8(ascii: "\n")], to: context.streams.output)
        }
        guard response.isSuccess else {
            throw Api.rejection(response, method: method, path: request.pathForMessages)
        }
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
