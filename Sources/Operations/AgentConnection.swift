import Basics
import PortalTokenCore

/// Client mode (docs/agent.md, "Client mode"): with `PORTAL_TOKEN_AGENT_SOCK` or
/// `--agent-socket`, the commands that read or write storage ask the agent instead, so a
/// container with no bus, no keyring and no kernel keyring works. What the agent answers is
/// what the local command would have printed, and its exit code is the client's.
package struct AgentConnection {
    /// The bound on one exchange by default (`agent-timeout-ms`): a stalled agent is an error in
    /// the few seconds git's callers wait, and the agent's own bounds on the keyring and on Portal
    /// fit within it.
    package static let defaultTimeoutMilliseconds = 10_000
    /// The header of the agent's answers that carries the command's exit code.
    package static let exitHeader = "Portal-Token-Exit"

    package let socketPath: String
    package let timeoutMilliseconds: Int
    package let streams: StandardStreams
    package let services: Services

    /// `$XDG_RUNTIME_DIR/portal-token/NAME`: the socket paths every client and unit agree on.
    package static func defaultSocketPath(_ name: String, environment: [String: String]) -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        return runtime + "/portal-token/" + name
    }

    /// One request; an agent that cannot be reached is a storage failure (exit 4), at once when
    /// nothing listens, within the bound when it does not answer.
    package func call(_ method: String, _ target: String, body: [UInt8]? = nil) throws -> HTTPResponse {
        try exchange(HTTPRequest(method: method, url: target, body: body))
    }

    package func exchange(_ request: HTTPRequest) throws -> HTTPResponse {
        do {
            return try services.agentExchange(socketPath, request, timeoutMilliseconds)
        } catch {
            throw CLIError(
                error.message,
                hint: "start it with 'portal-token agent' (or 'systemctl --user start portal-token-agent.socket'), "
                    + "or unset PORTAL_TOKEN_AGENT_SOCK to use the local store",
                exitCode: .storage)
        }
    }

    /// Prints an answer as the local command would have: on success its body on stdout;
    /// otherwise what the agent said on stderr, and its exit code.
    package func relay(_ response: HTTPResponse) throws {
        if response.status == 200 || (response.status == 404 && isQuietMiss(response)) {
            var body = response.body
            streams.write(body, to: streams.output)
            zeroize(&body)
            if let code = exitCode(response), code != .success { throw SilentExit(code: code) }
            return
        }
        try fail(response)
    }

    /// A 404 whose command succeeded with nothing to say: a git `get` that matched nothing.
    private func isQuietMiss(_ response: HTTPResponse) -> Bool {
        exitCode(response) == .success
    }

    /// What the agent said went wrong, on stderr, and its exit code (4 when it gave none).
    package func fail(_ response: HTTPResponse) throws -> Never {
        let text = String(decoding: response.body, as: UTF8.self)
        for line in text.split(separator: "\n") { streams.printError(String(line)) }
        if text.isEmpty { streams.printError("portal-token: error: the agent answered HTTP \(response.status)") }
        throw SilentExit(code: exitCode(response) ?? .storage)
    }

    package func exitCode(_ response: HTTPResponse) -> ExitCode? {
        response.headers.value(for: AgentConnection.exitHeader).flatMap(Int32.init).flatMap(ExitCode.init(rawValue:))
    }

    /// A request to the Portal API through the agent's own proxy (any path outside `/v1`): the
    /// agent adds the bearer, slides the expiry, and on a 401 ends the session and runs the hook
    /// once. An answer the agent made itself (it carries the exit code) is its error, relayed;
    /// every other is Portal's, for the caller to judge.
    package func portal(_ method: String, _ path: String, body: [UInt8]?, headers: [HTTPHeader]) throws -> HTTPResponse
    {
        var request = HTTPRequest(method: method, url: path, body: body)
        // The header policy every request to Portal keeps (PortalRequestBuilder's).
        request.headers =
            headers + [HTTPHeader("Accept", "application/json"), HTTPHeader("Content-Type", "application/json")]
        let response = try exchange(request)
        if response.status >= 300, exitCode(response) != nil { try fail(response) }
        return response
    }

    /// The agent's status report (`GET /v1/status`), as `status --format json` prints it: of the
    /// account the client chose where it chose one.
    package func statusReport(_ context: Context) throws -> [String: JSONValue] {
        let target = try "/v1/status" + accountQuery(context)
        let response = try call("GET", target)
        guard response.status == 200, case .object(let report)? = try? JSONValue.parse(response.body) else {
            try fail(response)
        }
        return report
    }

    /// The session the agent serves: whose, and until when; not signed in is the error a local
    /// run gives (exit 1).
    package func sessionStatus(_ context: Context) throws -> (
        authEnvironmentID: String, endUserID: String, expiresAt: String?
    ) {
        let report = try statusReport(context)
        let environmentID = report["authEnvironmentId"]?.stringValue ?? ""
        guard report["signedIn"]?.boolValue == true, let endUserID = report["endUserId"]?.stringValue else {
            throw SessionError.notSignedIn(authEnvironmentID: environmentID)
        }
        return (environmentID, endUserID, report["expiresAt"]?.stringValue)
    }

    /// Letters, digits and `-_.:/`: what environment IDs and API versions are made of.
    package static func isSafeWord(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 256
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || Array("-_.:/".utf8).contains(byte)
            }
    }

    /// `?env=…&endUser=…`: the client's own choice of account where it makes one (its settings,
    /// its directory, its accounts file), else nothing, and the agent's choice holds.
    package func accountQuery(_ context: Context) throws -> String {
        let encode = { (value: String) in
            PercentCoding.encode(value) { byte in
                Self.isSafeWord(String(decoding: [byte], as: UTF8.self)) && byte != UInt8(ascii: ":")
                    && byte != UInt8(ascii: "/")
            }
        }
        let account = try context.localAccountChoice()
        let named = context.settings.value(.endUser)?.trimmingWhitespace
        var parameters: [String] = []
        if let environmentID = account?.authEnvironmentID { parameters.append("env=" + encode(environmentID)) }
        if let endUserID = account?.endUserID ?? (named?.isEmpty == false ? named : nil) {
            parameters.append("endUser=" + encode(endUserID))
        }
        return parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&")
    }

    /// The session as the agent hands it out (`GET /v1/token`): the token, end user,
    /// environment and expiry; the agent has already slid, checked or ended it.
    package func usableSession(_ context: Context) throws -> PortalSession {
        let target = try "/v1/token" + accountQuery(context)
        let response = try call("GET", target)
        guard response.status == 200 else { try fail(response) }
        var body = response.body
        defer { zeroize(&body) }
        guard let object = try? JSONValue.parse(String(decoding: body, as: UTF8.self)),
            let token = object["token"]?.stringValue, let endUserID = object["endUserId"]?.stringValue,
            let authEnvironmentID = object["authEnvironmentId"]?.stringValue
        else {
            throw CLIError("the agent's answer to GET /v1/token is not a session", exitCode: .storage)
        }
        // The expiry is all a client needs of the timing: a record whose idle window ends then.
        let expiresAt = object["expiresAt"]?.stringValue.flatMap(RFC3339.parse)
        let lastActivity = expiresAt.map { $0 - PortalSession.idleInterval }
        return PortalSession(
            token: Secret(token), endUserID: endUserID, authEnvironmentID: authEnvironmentID,
            issuedAt: lastActivity, lastActivityAt: lastActivity)
    }
}

extension Context {
    /// The agent this run goes through, nil when it uses the local stores.
    package func agent() throws(SettingError) -> AgentConnection? {
        guard let path = settings.value(.agentSocket), !path.isEmpty else { return nil }
        return AgentConnection(
            socketPath: path,
            timeoutMilliseconds: try settings.milliseconds(
                .agentTimeout, default: AgentConnection.defaultTimeoutMilliseconds),
            streams: streams, services: services)
    }

    /// The session for `token`, `exec`, `exec-credential` and script-mode `get`: from the
    /// agent in client mode, else from the store (docs/sessions.md, "The commands that read the session").
    package func usableSession() throws -> PortalSession {
        if let agent = try agent() { return try agent.usableSession(self) }
        return try sessionService().usableSession()
    }
}
