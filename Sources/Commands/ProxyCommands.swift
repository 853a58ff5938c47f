import Basics
import Glibc
import Operations
import PortalTokenCore
import Synchronization

/// The authenticating reverse proxy to the Portal API (docs/proxy.md): each request the rules
/// allow goes to the configured API origin with the session's bearer added, and its answer comes
/// back as it arrives; everything else is refused before any connection to Portal is made. On a
/// Unix socket (the agent's, or `proxy --socket`) the rules file decides per caller first, from
/// the kernel's word on who it is (docs/agent.md, "The rules file"). Each request forwarded or
/// refused writes one audit line (docs/audit.md, "The proxy's lines").
final class PortalProxy: @unchecked Sendable {
    let rules: ProxyRules
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

    /// Where a proxy sends what it admits: to Portal with the session's bearer, or to the
    /// agent's socket, whose own proxy adds it (client mode, docs/agent.md).
    enum Upstream {
        case portal(ProxySessions)
        case agent(AgentConnection)
    }

    /// `address` is where `portal-token proxy` listens; nil for the agent's sockets.
    init(
        rules: ProxyRules, policy: CallerPolicy?, address: LocalListenAddress?, context: Context,
        upstream: Upstream, log: (@Sendable (String) -> Void)? = nil
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
    }

    /// The session service a proxy sends with, and the mark that tells it a request of its own
    /// ended the session.
    struct ProxySessions {
        let service: SessionService
        let ended: SessionEndMark

        init(_ context: Context) throws {
            let ended = SessionEndMark()
            self.ended = ended
            service = try context.sessionService(ended: { ended.set() })
        }
    }

    /// The header of a refusal by the rules file: the rule that decided, or `default`.
    static let decidedByHeader = "Portal-Token-Decided-By"

    /// The value the proxy puts before a client's own `User-Agent`.
    static var userAgent: String { "portal-token/\(Release.version)" }

    func handle(
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
        if let policy {
            // A Unix socket's server closes a connection whose caller the kernel cannot name, so
            // a missing identity here is a refusal too.
            let operation = AgentRules.Operation.proxy(method: request.method, path: String(request.path))
            let decision =
                caller.map { policy.decide(operation, for: $0, on: socket) }
                ?? AgentRules.Decision(allowed: false, decidedBy: "default", reason: "the caller is unknown")
            guard decision.allowed else {
                trace("proxy: \(request.method) \(request.path) refused (\(decision.decidedBy))")
                var suggestion = ""
                if let caller {
                    policy.remember(
                        operation, for: caller, on: socket, decidedBy: decision.decidedBy, time: Int64(time(nil)))
                    suggestion = policy.suggestionLines(for: operation, caller: caller, on: socket)
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
                    for text in AgentRouter.logged(suggestion) { log?(text) }
                }
                var response = HTTPServerResponse.failure(
                    403, "the proxy refused \(operation): \(decision.reason) (decided by \(decision.decidedBy))",
                    exit: .storage, more: suggestion)
                response.headers.append(HTTPHeader(Self.decidedByHeader, decision.decidedBy))
                exchange.refuse(response)
                return
            }
        }
        switch rules.decide(request) {
        case .refuse(let status, let reason, let unmarked):
            trace("proxy: \(request.method) \(request.path) refused (\(status))")
            line.outcome = .refused
            line.status = status
            line.written = throttle(unmarked ? .unnamed : .named)
            exchange.refuse(
                HTTPServerResponse.failure(status, "the proxy refused the request: \(reason)", exit: .storage))
        case .forward(let proxied):
            // Past the rules and checks: a body that streams slowly keeps its connection.
            exchange.admit()
            forward(proxied, exchange, &line)
        }
    }

    private func forward(_ proxied: ProxiedRequest, _ exchange: any LocalExchange, _ line: inout ProxyAuditLine) {
        let url = apiBase.url(path: proxied.target)
        var session: PortalSession?
        var authorization = proxied.clientAuthorization
        if authorization == nil, let sessions, let endedHere {
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
                session = current
                line.session = current
                authorization = current.token.withBytes { Secret(bytes: Array("Bearer ".utf8) + $0) }
            case .failure(let error):
                line.outcome = AuditDraft.outcome(of: error)
                line.endedSession = ended
                line.status = answer(error, exchange)
                return
            }
        }
        var bodyLength: Int?
        if case .length(let length) = proxied.body { bodyLength = length }
        let upstream = StreamedHTTPRequest(
            method: proxied.method, url: url, headers: proxied.headers, authorization: authorization,
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
                endedSession: line.endedSession, unwrittenRefusals: line.unwrittenRefusals))
    }
}

/// What one proxied request's audit line says, filled in as the request goes: never its path,
/// query, headers or body (docs/audit.md, "What is never written").
struct ProxyAuditLine {
    var method: String
    var outcome: AuditOutcome = .failed
    /// The status the client was answered: Portal's, or the proxy's own.
    var status: Int?
    /// The session whose bearer was added.
    var session: PortalSession?
    var endedSession = false
    /// false for a refusal the throttle counts rather than writes.
    var written = true
    /// The refusals not written before this one's line.
    var unwrittenRefusals = 0

    /// The method as the log holds it: an uppercase name, as Portal's methods are; any other
    /// text a client sent is left out rather than written.
    var loggedMethod: String? {
        let bytes = method.utf8
        guard (1...16).contains(bytes.count), bytes.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else { return nil }
        return method
    }
}

/// Whether the session service, during one call made under the proxy's session lock, found this
/// process to be the one that removed the session (and so ran the hook).
final class SessionEndMark: Sendable {
    private let ended = Atomic<Bool>(false)

    func set() { ended.store(true, ordering: .sequentiallyConsistent) }

    /// Runs `body` and says whether it ended the session. Called under the proxy's session lock
    /// only, and read there: another request's call cannot clear or set it in between.
    func watch<T>(_ body: () throws -> T) -> (result: Result<T, any Error>, ended: Bool) {
        ended.store(false, ordering: .sequentiallyConsistent)
        let result = Result { try body() }
        return (result, ended.exchange(false, ordering: .sequentiallyConsistent))
    }
}

struct ProxyCommand: Command {
    static let name = "proxy"
    static let summary = "Serve the Portal API on a local port or socket, adding the session token"
    static let details = """
        A reverse proxy to the configured API host, never an open one: a request to it
        goes to the same path on the API host, with Authorization: Bearer and the
        session token added when the request carries no Authorization of its own (one it
        carries passes untouched). The token never leaves portal-token. Only the methods
        and path prefixes allowed (default: GET, HEAD, POST, PUT, PATCH and DELETE under
        /api/v3/clients/me) are forwarded, another method getting 405 and another path
        403; a request in absolute form is refused, redirects are passed back, never
        followed, and http_proxy and the like are ignored. Bodies stream in both
        directions.

        A 401 from Portal ends the session (the on-session-invalidated hook runs once)
        and is passed back; every accepted request slides the expiry, as api does. In
        client mode (PORTAL_TOKEN_AGENT_SOCK) requests go on to the agent's own proxy,
        which adds the token; the agent's sockets serve the same proxy.

        With --listen (the default), localhost:PORT or PORT alone names the same
        loopback port; it prints PORTAL_API_HOST, PORTAL_TOKEN_PROXY_URL,
        PORTAL_TOKEN_PROXY_HEADER and PORTAL_TOKEN_PROXY_CREDENTIAL lines on stdout.
        Every request must then carry Host 127.0.0.1:PORT (or localhost:PORT), else 403,
        and the header Portal-Token-Proxy with the credential: without it the answer is
        412, with another value 403. It runs until killed.

        With --socket, PATH is absolute; the socket is 0600, in a directory only you can
        write, and serves the processes the rules file allows
        ($XDG_CONFIG_HOME/portal-token/agent.rules, the agent's: allow proxy). Without a
        rule, your own user in your own user namespace, outside containers, may send
        what this proxy forwards; refused callers get 403. SIGTERM, SIGINT or SIGHUP
        stop it after the requests in progress, and the socket is removed.

        With --allow-path (repeatable), a path passes when it equals PREFIX or goes on
        below it after a slash; paths with dot segments, empty segments, a semicolon or
        encoded dots or slashes are refused whatever the prefixes. With --allow-method
        (repeatable), METHOD is taken in any case, never CONNECT.

        """ + sessionSettings

    let address: LocalListenAddress
    let methods: [String]
    let pathPrefixes: [String]

    init(arguments: ParsedArguments) throws(CLIError) {
        if let path = arguments.value(.proxySocket) {
            guard path.hasPrefix("/") else { throw .usage("--socket takes an absolute path") }
            address = .unixSocket(path: path)
        } else {
            address = .loopback(port: try Self.port(arguments.value(.listen) ?? "127.0.0.1:0"))
        }
        var methods: [String] = []
        for method in arguments.values(.allowMethod) {
            let upper = method.uppercased()
            guard !upper.isEmpty, upper.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }),
                upper != "CONNECT"
            else {
                throw .usage("--allow-method takes an HTTP method such as GET (never CONNECT)")
            }
            methods.append(upper)
        }
        self.methods = methods.isEmpty ? ProxyRules.defaultMethods : methods
        var prefixes: [String] = []
        for prefix in arguments.values(.allowPath) {
            guard prefix.hasPrefix("/"), ProxyRules.isAllowed(path: prefix[...], prefixes: [prefix]) else {
                throw .usage(
                    "--allow-path takes a path such as /api/v3/clients/me, without dot segments or encoded slashes")
            }
            prefixes.append(prefix)
        }
        pathPrefixes = prefixes.isEmpty ? ProxyRules.defaultPathPrefixes : prefixes
    }

    /// `127.0.0.1:PORT`, `localhost:PORT` or `PORT`.
    static func port(_ text: String) throws(CLIError) -> UInt16 {
        var portText = Substring(text)
        for prefix in ["127.0.0.1:", "localhost:"] where text.lowercased().hasPrefix(prefix) {
            portText = text.dropFirst(prefix.count)
        }
        guard !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let port = UInt16(portText)
        else {
            throw .usage(
                "--listen takes 127.0.0.1:PORT (or PORT): the proxy listens on loopback only",
                hint: "for example --listen 127.0.0.1:8787, or 127.0.0.1:0 for any free port")
        }
        return port
    }

    func run(in context: Context) throws {
        // In client mode it sends to the agent's proxy, which holds the session.
        let upstream =
            try context.agent().map(PortalProxy.Upstream.agent) ?? .portal(PortalProxy.ProxySessions(context))
        // Callers on a Unix socket are judged by the agent's rules file, on the kernel's word.
        var policy: CallerPolicy?
        if case .unixSocket = address {
            let streams = context.streams
            policy = try CallerPolicy.load(context, rulesPath: nil) { streams.printError($0) }
            // The own user may send what this proxy was started to forward.
            policy?.defaultProxy = .proxy(methods: methods, prefixes: pathPrefixes)
        }
        let server = try context.services.bindLocalServer(address)
        var credential: Secret?
        let listener: ProxyListenerKind
        if let port = server.port {
            listener = .loopback(port: port)
            credential = ProxyRules.makeCredential()
        } else {
            listener = .unixSocket
        }
        let proxy = try PortalProxy(
            rules: ProxyRules(
                listener: listener, credential: credential, methods: methods, pathPrefixes: pathPrefixes,
                userAgent: PortalProxy.userAgent),
            policy: policy, address: address, context: context, upstream: upstream)
        if let port = server.port, let credential {
            var lines = Array(
                """
                PORTAL_API_HOST=127.0.0.1:\(port)
                \(ProxyEnvironment.url)=http://127.0.0.1:\(port)
                \(ProxyEnvironment.header)=\(ProxyRules.markerHeader)
                \(ProxyEnvironment.credential)=\(credential.text)

                """.utf8)
            context.streams.write(lines, to: context.streams.output)
            zeroize(&lines)
        } else if case .unixSocket(let path) = address {
            context.streams.printError("portal-token: proxy listening on \(path)")
        }
        try server.run { request, exchange, caller in proxy.handle(request, exchange, caller) }
    }
}

extension ExecCommand {
    /// `exec --proxy`: the command runs as a child, with a proxy on 127.0.0.1 for it alone (a
    /// random port and credential) that lives as long as it does; its environment names the
    /// proxy and never holds the token (docs/proxy.md, "exec --proxy").
    func runWithProxy(in context: Context) throws -> Never {
        // In client mode the proxy sends to the agent's, which holds the session.
        let upstream: PortalProxy.Upstream
        let environmentID: String?
        if let agent = try context.agent() {
            upstream = .agent(agent)
            environmentID = try agent.sessionStatus(context).authEnvironmentID
        } else {
            let sessions = try PortalProxy.ProxySessions(context)
            _ = try sessions.service.usableSession()
            upstream = .portal(sessions)
            environmentID = sessions.service.authEnvironmentID
        }
        // Signals this process forwards or ignores are taken by sigwait below, so they are blocked
        // before any thread starts; the command gets them back at their defaults.
        var handled = sigset_t()
        sigemptyset(&handled)
        for signal in [SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGCHLD] { sigaddset(&handled, signal) }
        pthread_sigmask(SIG_BLOCK, &handled, nil)

        let server = try context.services.bindLocalServer(.loopback(port: 0))
        guard let port = server.port else { throw CLIError("the proxy has no port", exitCode: .usage) }
        let credential = ProxyRules.makeCredential()
        let proxy = try PortalProxy(
            rules: ProxyRules(
                listener: .loopback(port: port), credential: credential, userAgent: PortalProxy.userAgent),
            policy: nil, address: .loopback(port: port), context: context, upstream: upstream)
        try server.start { request, exchange, caller in proxy.handle(request, exchange, caller) }

        var environment = ProcessEnvironment.current()
        environment.removeValue(forKey: Self.defaultTokenVariable)
        environment.removeValue(forKey: "PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT")
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(port)"
        environment[ProxyEnvironment.url] = "http://127.0.0.1:\(port)"
        environment[ProxyEnvironment.header] = ProxyRules.markerHeader
        environment[ProxyEnvironment.credential] = credential.text
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = environmentID

        // The run's own line, as plain exec writes it (its exit code is COMMAND's); each request
        // COMMAND sends through the proxy writes its own.
        context.audit?.program = String(command[0].split(separator: "/").last ?? "")
        context.recordAudit(error: nil, exitCode: nil)
        closeOwnDescriptorsOnExec()
        let child = try spawn(environment: environment)
        let code = waitForChild(child, signals: handled)
        server.stop()
        exit(code)
    }

    /// The command in this process's group, where the terminal's SIGINT and SIGQUIT reach it.
    private func spawn(environment: [String: String]) throws -> pid_t {
        switch ChildProcess.spawn(
            command[0], Array(command.dropFirst()), searchPath: true, environment: environment, ownProcessGroup: false)
        {
        case .success(let child): return child
        case .failure(let failure):
            let name = String(command[0].prefix(256))
            if failure.number == ENOENT || failure.number == ENOTDIR {
                throw CLIError(
                    "cannot run '\(name)': command not found", hint: "check the name and PATH",
                    exitCode: .commandNotFound)
            }
            throw CLIError(
                "cannot run '\(name)': \(String(cString: strerror(failure.number)))", exitCode: .commandNotExecutable)
        }
    }

    /// Waits for the command, passing on SIGTERM and SIGHUP; SIGINT and SIGQUIT from the terminal
    /// reach it directly. Its exit status, or 128 + the signal that ended it, as a shell reports.
    private func waitForChild(_ child: pid_t, signals: sigset_t) -> Int32 {
        var set = signals
        while true {
            var status: Int32 = 0
            let ended = waitpid(child, &status, WNOHANG)
            if ended == child {
                let signal = status & 0x7f
                return signal == 0 ? (status >> 8) & 0xff : 128 + signal
            }
            if ended < 0, errno != EINTR { return 1 }
            var received: Int32 = 0
            guard sigwait(&set, &received) == 0 else { continue }
            if received == SIGTERM || received == SIGHUP { kill(child, received) }
        }
    }
}
