import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// The authenticating reverse proxy to the Portal API (docs/proxy.md): each request the rules
/// allow goes to the configured API origin with the session's bearer added, and its answer comes
/// back as it arrives; everything else is refused before any connection to Portal is made. On a
/// Unix socket (the agent's, or `proxy --socket`) the rules file decides per caller first, from
/// the kernel's word on who it is (docs/agent.md, "The rules file"). Each request forwarded or
/// refused writes one audit line (docs/audit.md, "The proxy's lines").
package final class PortalProxy: @unchecked Sendable {
    package let rules: ProxyRules
    /// The rules file's judge of callers on a Unix socket; nil on a loopback port, whose callers
    /// the marker header's credential admits.
    private let policy: CallerPolicy?
    /// Where refusals by the rules file are told (the agent's log); nil says nothing.
    private let log: (@Sendable (String) -> Void)?
    private let apiBase: PortalAPIBase
    /// The session the proxy sends with; nil when its upstream is the agent, which adds the
    /// bearer, slides the expiry and ends the session on a 401 itself (client mode).
    private let sessions: SessionService?
    private let transport: any StreamingHTTPTransport
    private let trace: @Sendable (String) -> Void
    private let warn: @Sendable (String) -> Void
    /// The session is read, slid and ended by one request at a time in this process; other
    /// processes are kept apart by the store's own lock, as for `api`.
    private let sessionAccess = Mutex(())
    /// Set by the session service, under `sessionAccess`, when this process removed the session.
    private let endedHere: SessionEndMark?
    /// nil when the log is off.
    private let auditLog: (any AuditLog)?
    /// The `caller.socket` of each line: the Unix socket's path, or "tcp"; nil names the agent's
    /// socket the request came in on (`main` or `restricted`), as the agent's own lines do.
    private let socketName: String?
    private let services: Services
    /// The key of the credentials this proxy mints itself (`exec --proxy`'s child's); nil for none.
    private let localKey: Secret?
    /// The environment the proxy sends for, when it is known here.
    private let environmentID: String?
    private let delegations: DelegationRegistry

    /// Where a proxy sends what it admits: to Portal with the session's bearer, or to the
    /// agent's socket, whose own proxy adds it (client mode, docs/agent.md).
    package enum Upstream {
        case portal(ProxySessions)
        case agent(AgentConnection)
    }

    /// `address` is where `portal-token proxy` listens; nil for the agent's sockets.
    /// `localKey` signs the credentials this proxy accepts beside the session's
    /// (docs/delegation.md); `environmentID` is the environment it sends for, when it is known.
    package init(
        rules: ProxyRules, policy: CallerPolicy?, address: LocalListenAddress?, context: Context,
        upstream: Upstream, log: (@Sendable (String) -> Void)? = nil, localKey: Secret? = nil,
        environmentID: String? = nil
    ) throws {
        self.rules = rules
        self.policy = policy
        self.log = log
        var options = try HTTPTransportOptions(settings: context.settings)
        switch upstream {
        case .portal(let sessions):
            apiBase = try context.apiBase()
            self.sessions = sessions.service
            endedHere = sessions.ended
            auditLog = context.auditLog()
        case .agent(let agent):
            // The agent's proxy judges, sends and writes the audit line; the name is its socket's.
            apiBase = try PortalAPIBase(apiHost: "http://localhost")
            options.unixSocketPath = agent.socketPath
            options.connectTimeoutMilliseconds = agent.timeoutMilliseconds
            (sessions, endedHere, auditLog) = (nil, nil, nil)
        }
        self.transport = context.services.streamingTransport(options)
        self.trace = context.trace
        let streams = context.streams
        self.warn = { streams.printError("portal-token: warning: \($0)") }
        switch address {
        case .unixSocket(let path)?: socketName = path
        case .loopback?: socketName = "tcp"
        case nil: socketName = nil
        }
        self.services = context.services
        self.localKey = localKey
        self.environmentID = environmentID ?? sessions?.authEnvironmentID
        delegations = DelegationRegistry(context: context)
    }

    /// The session service a proxy sends with, and the mark that tells it a request of its own
    /// ended the session.
    package struct ProxySessions {
        package let service: SessionService
        package let ended: SessionEndMark

        package init(_ context: Context) throws {
            let ended = SessionEndMark()
            self.ended = ended
            service = try context.sessionService(ended: { ended.set() })
        }
    }

    /// The header of a refusal by the rules file: the rule that decided, or `default`.
    package static let decidedByHeader = "Portal-Token-Decided-By"

    /// The value the proxy puts before a client's own `User-Agent`.
    package static var userAgent: String { "portal-token/\(Release.version)" }

    package func handle(
        _ request: HTTPServerRequest, _ exchange: any LocalExchange, _ caller: CallerIdentity?,
        socket: AgentRules.Socket = .main
    ) {
        // Read while the caller waits for its answer: once answered, it may be gone.
        let auditCaller = auditLog == nil ? nil : self.auditCaller(caller, socket: socket)
        var line = ProxyAuditLine(method: request.method)
        defer { if let auditCaller { record(line, auditCaller) } }
        // A refusal's line is throttled, so that no caller can push served lines out of the log.
        func throttle(_ kind: RefusalThrottle.Kind) -> Bool {
            guard case .write(let unwritten) = RefusalAudit.admit(kind) else { return false }
            line.unwrittenRefusals = unwritten
            return true
        }
        // A delegated credential in the marker header: read strictly here, its caveats judged once
        // the proxy's own rules passed (docs/delegation.md, "What the proxy checks").
        var delegated: DelegatedCredential?
        if let offered = request.headers.value(for: ProxyRules.markerHeader),
            offered.hasPrefix(DelegatedCredential.prefix)
        {
            delegated = DelegatedCredential(text: Array(offered.utf8))
            line.delegation = delegated?.chain ?? []
            if delegated == nil {
                refuseDelegated(
                    "the \(ProxyRules.markerHeader) header holds no delegated credential this proxy can read", request,
                    exchange, &line)
                return
            }
        }
        if let policy {
            // A Unix socket's server closes a connection whose caller the kernel cannot name, so
            // a missing identity here is a refusal too.
            let operation = AgentRules.Operation.proxy(method: request.method, path: String(request.path))
            let decision =
                caller.map { caller in
                    policy.admit(operation, for: caller, on: socket, waiting: exchange.informAsking(milliseconds:))
                }
                ?? AgentRules.Decision(allowed: false, decidedBy: "default", reason: "the caller is unknown")
            guard decision.allowed else {
                trace("proxy: \(request.method) \(request.path) refused (\(decision.decidedBy))")
                var suggestion = ""
                if let caller {
                    policy.remember(
                        operation, for: caller, on: socket, decidedBy: decision.decidedBy, time: Int64(time(nil)))
                    if decision.ask == nil {
                        suggestion = policy.suggestionLines(for: operation, caller: caller, on: socket)
                    }
                }
                line.outcome = .refused
                line.status = 403
                line.written = throttle(.named)
                if line.written {
                    log?(
                        "portal-token agent: refused \(operation) on the \(socket.rawValue) socket for "
                            + "\(caller.map(String.init(describing:)) ?? "an unknown caller") "
                            + "(\(decision.decidedBy): \(decision.reason))"
                            + RefusalAudit.unloggedNote(line.unwrittenRefusals))
                    for text in CallerPolicy.logged(suggestion) { log?(text) }
                }
                var response = HTTPServerResponse.failure(
                    403, "the proxy refused \(operation): \(decision.reason) (decided by \(decision.decidedBy))",
                    exit: .storage, more: suggestion)
                response.headers.append(HTTPHeader(Self.decidedByHeader, decision.decidedBy))
                exchange.refuse(response)
                return
            }
        }
        switch rules.decide(request, delegated: delegated != nil) {
        case .refuse(let status, let reason, let unmarked):
            trace("proxy: \(request.method) \(request.path) refused (\(status))")
            line.outcome = .refused
            line.status = status
            line.written = throttle(unmarked ? .unnamed : .named)
            exchange.refuse(
                HTTPServerResponse.failure(status, "the proxy refused the request: \(reason)", exit: .storage))
        case .forward(let proxied):
            var offered: OfferedCredential?
            if let delegated {
                let ownKey = localKey.map(delegated.isSigned(by:)) == true
                switch judge(delegated, ownKey: ownKey, request, caller, socket) {
                case .refused(let reason):
                    refuseDelegated(reason, request, exchange, &line)
                    return
                case .passes(_, let uses):
                    offered = OfferedCredential(credential: delegated, ownKey: ownKey, uses: uses)
                }
            }
            // Past the rules and checks: a body that streams slowly keeps its connection.
            exchange.admit()
            forward(proxied, exchange, &line, offered: offered)
        }
    }

    /// A delegated credential whose caveats passed: whether this proxy's own key signed it, and
    /// the uses each credential of its chain may make.
    private struct OfferedCredential {
        let credential: DelegatedCredential
        let ownKey: Bool
        let uses: [String: Int]
    }

    /// A 403 for a delegated credential, before any upstream connection. Its audit line is
    /// throttled as an unmarked refusal's, since any local process can send a `ptd1.` value.
    private func refuseDelegated(
        _ reason: String, _ request: HTTPServerRequest, _ exchange: any LocalExchange, _ line: inout ProxyAuditLine
    ) {
        exchange.refuse(delegatedRefusal(reason, "\(request.method) \(request.path)", &line))
    }

    /// The answer to a refused delegated credential, its audit line filled in.
    private func delegatedRefusal(_ reason: String, _ what: String, _ line: inout ProxyAuditLine)
        -> HTTPServerResponse
    {
        trace("proxy: \(what) refused (delegated credential)")
        line.outcome = .refused
        line.status = 403
        if case .write(let unwritten) = RefusalAudit.admit(.unnamed) {
            line.unwrittenRefusals = unwritten
        } else {
            line.written = false
        }
        return HTTPServerResponse.failure(403, "the proxy refused the request: \(reason)", exit: .storage)
    }

    /// A delegated credential's caveats against the request and the caller this proxy sees. A
    /// proxy whose upstream is the agent and that did not mint the credential leaves its `env`
    /// caveats to the agent, which checks the whole credential again against the session it holds
    /// (its caller conditions then against this process too).
    private func judge(
        _ credential: DelegatedCredential, ownKey: Bool, _ request: HTTPServerRequest, _ caller: CallerIdentity?,
        _ socket: AgentRules.Socket
    ) -> DelegatedCredential.Verdict {
        credential.judge(
            DelegatedCredential.Request(
                method: request.method, path: request.path, environment: environmentID, caller: caller,
                socket: socket, now: services.now(), environmentJudgedUpstream: sessions == nil && !ownKey))
    }

    /// Whether a delegated credential that passed its caveats may be served with `session`: its
    /// signature under this proxy's key or the session's, then the registry (revoked, listed,
    /// used up). The reason for a refusal; nil to serve.
    private func admit(_ offered: OfferedCredential, session: PortalSession?) -> String? {
        let credential = offered.credential
        guard offered.ownKey || session.map({ credential.isSigned(by: DelegatedCredential.rootKey(of: $0)) }) == true
        else {
            return "the delegated credential's signature does not verify"
        }
        do {
            return try delegations.admit(
                credential, uses: offered.uses, listedRoot: !offered.ownKey, environment: environmentID,
                now: services.now())
        } catch {
            return CLIError(error).message
        }
    }

    private func forward(
        _ proxied: ProxiedRequest, _ exchange: any LocalExchange, _ line: inout ProxyAuditLine,
        offered: OfferedCredential?
    ) {
        let url = apiBase.url(path: proxied.target)
        var session: PortalSession?
        var authorization = proxied.clientAuthorization
        var headers = proxied.headers
        // A delegated credential under the session's key is checked against the session, even
        // when the client sends its own Authorization (which then goes untouched).
        var signing: PortalSession?
        if authorization == nil || offered.map({ !$0.ownKey }) == true, let sessions, let endedHere {
            guard sessions.allowsBearer(url) else {
                line.status = 502
                try? exchange.answer(
                    HTTPServerResponse.failure(
                        502, "the proxy's configured API host may not receive the session token", exit: .usage))
                return
            }
            let (sent, ended) = sessionAccess.withLock { _ in endedHere.watch { try sessions.sessionToSend() } }
            switch sent {
            case .success(let current):
                signing = current
                if authorization == nil {
                    session = current
                    line.session = current
                    authorization = current.token.withBytes { Secret(bytes: Array("Bearer ".utf8) + $0) }
                }
            case .failure(let error):
                line.outcome = AuditDraft.outcome(of: error)
                line.endedSession = ended
                line.status = answer(error, exchange)
                return
            }
        }
        if let offered {
            if sessions == nil, !offered.ownKey {
                // Not this proxy's own: the agent's proxy checks it against the session it holds.
                headers.append(HTTPHeader(ProxyRules.markerHeader, offered.credential.text.text))
            } else if let refusal = admit(offered, session: signing) {
                try? exchange.answer(delegatedRefusal(refusal, proxied.method, &line))
                return
            }
        }
        var bodyLength: Int?
        if case .length(let length) = proxied.body { bodyLength = length }
        let upstream = StreamedHTTPRequest(
            method: proxied.method, url: url, headers: headers, authorization: authorization,
            body: proxied.body == .none ? nil : exchange, bodyLength: bodyLength)
        let outcome: StreamedHTTPOutcome
        do {
            outcome = try transport.exchange(upstream, into: exchange)
        } catch {
            trace("proxy: \(proxied) failed: \(error.message)")
            line.outcome = .unreachable
            if !exchange.hasBegun {
                let status: Int
                switch error {
                case .timedOut, .connectTimedOut: status = 504
                default: status = 502
                }
                line.status = status
                try? exchange.answer(HTTPServerResponse.failure(status, "the proxy: \(error.message)", exit: .network))
            }
            return
        }
        trace("proxy: \(proxied) -> HTTP \(outcome.status)")
        line.status = outcome.status
        line.outcome = .served
        // The client has its whole answer before a 401's hook runs.
        exchange.complete()
        guard let session, let sessions, let endedHere else { return }
        let (settled, ended) = sessionAccess.withLock { _ in
            endedHere.watch { try sessions.settle(session, status: outcome.status, answeredBy: outcome.effectiveURL) }
        }
        switch settled {
        case .success: break
        case .failure(SessionError.ended):
            // The 401 went back to the client; the hook has run, in this process or another.
            line.outcome = .unauthorized
            line.endedSession = ended
        case .failure(let error):
            warn("the session could not be updated after a proxied request: \(CLIError(error).message)")
        }
    }

    /// What the proxy answers when it cannot send a request with the session; returns the status.
    private func answer(_ error: any Error, _ exchange: any LocalExchange) -> Int {
        let status: Int
        switch error {
        case let error as SessionError:
            switch error {
            case .notSignedIn, .ended: status = 401
            case .network, .checkFailed: status = 502
            case .foreignOrigin: status = 403
            }
        case is StoreError: status = 503
        default: status = 500
        }
        let failure = CLIError(error)
        try? exchange.answer(
            HTTPServerResponse.failure(status, failure.message, hint: failure.hint, exit: failure.exitCode))
        return status
    }

    /// The caller the listener knows: on a Unix socket the kernel's identity of it, as the
    /// agent's lines name theirs; on the loopback port no one in particular.
    private func auditCaller(_ caller: CallerIdentity?, socket: AgentRules.Socket) -> AuditCaller {
        let name = socketName ?? socket.rawValue
        guard let caller else { return AuditCaller(socket: name) }
        return services.auditCaller(caller, socket: name)
    }

    /// Writes a request's one line: the session it was sent with, if any (none when the client
    /// sent its own Authorization).
    private func record(_ line: ProxyAuditLine, _ caller: AuditCaller) {
        guard line.written else { return }
        auditLog?.record(
            AuditEvent(
                operation: .proxy, outcome: line.outcome, caller: caller,
                authEnvironmentID: line.session?.authEnvironmentID ?? sessions?.authEnvironmentID,
                endUserID: line.session?.endUserID, token: line.session?.token, method: line.loggedMethod,
                httpStatus: line.status.flatMap { (100...599).contains($0) ? $0 : nil },
                endedSession: line.endedSession, unwrittenRefusals: line.unwrittenRefusals,
                delegation: line.delegation))
    }
}

/// What one proxied request's audit line says, filled in as the request goes: never its path,
/// query, headers or body (docs/audit.md, "What is never written").
package struct ProxyAuditLine {
    package var method: String
    package var outcome: AuditOutcome = .failed
    /// The status the client was answered: Portal's, or the proxy's own.
    package var status: Int?
    /// The session whose bearer was added.
    package var session: PortalSession?
    package var endedSession = false
    /// false for a refusal the throttle counts rather than writes.
    package var written = true
    /// The refusals not written before this one's line.
    package var unwrittenRefusals = 0
    /// The delegated credential's chain of ids, the root's first, when one was offered.
    package var delegation: [String] = []

    /// The method as the log holds it: an uppercase name, as Portal's methods are; any other
    /// text a client sent is left out rather than written.
    package var loggedMethod: String? {
        let bytes = method.utf8
        guard (1...16).contains(bytes.count), bytes.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else { return nil }
        return method
    }
}

/// Whether the session service, during one call made under the proxy's session lock, found this
/// process to be the one that removed the session (and so ran the hook).
package final class SessionEndMark: Sendable {
    private let ended = Atomic<Bool>(false)

    package func set() { ended.store(true, ordering: .sequentiallyConsistent) }

    /// Runs `body` and says whether it ended the session. Called under the proxy's session lock
    /// only, and read there: another request's call cannot clear or set it in between.
    package func watch<T>(_ body: () throws -> T) -> (result: Result<T, any Error>, ended: Bool) {
        ended.store(false, ordering: .sequentiallyConsistent)
        let result = Result { try body() }
        return (result, ended.exchange(false, ordering: .sequentiallyConsistent))
    }
}

extension HTTPServerResponse {
    /// An answer the agent or the proxy makes itself, worded as the error funnel words one, with
    /// the exit code a local run would have had (`Portal-Token-Exit`): a client in client mode
    /// prints it and exits with that code.
    package static func failure(
        _ status: Int, _ message: String, hint: String? = nil, exit: ExitCode, more: String = ""
    )
        -> HTTPServerResponse
    {
        var response = HTTPServerResponse.text(
            status, "portal-token: error: \(message)\n" + (hint.map { "hint: \($0)\n" } ?? "") + more)
        response.headers.insert(HTTPHeader(AgentConnection.exitHeader, String(exit.rawValue)), at: 0)
        return response
    }
}
