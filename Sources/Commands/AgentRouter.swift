import Basics
import Glibc
import Operations
import PortalTokenCore
import Synchronization

/// What the agent does with one request (docs/agent.md, "The protocol"): one table names each
/// endpoint's method, the operation the rules judge, and the operation that answers, the very one
/// the command of the same name calls (`CredentialGet`, `Status`, …). The
/// operation's value goes back as the command's output, or as JSON for the client to render; an
/// error goes back in the funnel's words with the exit code a local run would have had, in the
/// `Portal-Token-Exit` header.
final class AgentRouter: Sendable {
    let policy: CallerPolicy
    /// The environment every request's settings are read from: the agent's own, prompts ruled out.
    let environment: [String: String]
    /// The environment a request without `?env=` gets: the agent's own setting (flag,
    /// variable or config file), which the rules judge `allow token` against.
    let defaultEnvironmentID: String
    /// The end user of the agent's own account, where it knows one.
    let defaultEndUserID: String?
    let verbose: Bool
    let log: @Sendable (String) -> Void
    /// One operation at a time: the stores' adapters are not all safe to use from several threads,
    /// and a request takes milliseconds.
    private let running: Mutex<Void> = Mutex(())
    private let services: ServicesBox
    /// Writes a line to the agent's audit log (a refusal's; an operation's own line is written by
    /// its context).
    private let recordAudit: @Sendable (AuditEvent) -> Void

    final class ServicesBox: @unchecked Sendable {
        let services: Services
        let streams: StandardStreams
        init(_ services: Services, _ streams: StandardStreams) { (self.services, self.streams) = (services, streams) }
    }

    /// `services` are the agent's own (Composition's `agentServices`); `streams` take what an
    /// operation says beside its value (a warning), into the agent's log.
    init(
        policy: CallerPolicy, environment: [String: String], defaultEnvironmentID: String?,
        defaultEndUserID: String? = nil, services: Services, streams: StandardStreams,
        verbose: Bool, log: @escaping @Sendable (String) -> Void,
        recordAudit: @escaping @Sendable (AuditEvent) -> Void = { _ in }
    ) {
        self.recordAudit = recordAudit
        self.policy = policy
        self.defaultEnvironmentID = defaultEnvironmentID ?? ""
        self.defaultEndUserID = defaultEndUserID
        var environment = environment
        // A request never prompts (no one is at the agent's terminal for it), and the agent
        // never forwards to an agent.
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["PORTAL_TOKEN_AGENT_SOCK"] = nil
        environment["KUBERNETES_EXEC_INFO"] = nil
        self.environment = environment
        self.services = ServicesBox(services, streams)
        self.verbose = verbose
        self.log = log
    }

    /// One request as the routes see it.
    struct Request {
        let query: [String: String]
        let body: [UInt8]
        /// The account the rules judge: the one asked for, else the agent's own choice.
        let account: String
        /// A git request's body, parsed.
        var credential: CredentialRequest?
    }

    /// An operation's value as it goes back.
    struct Answer {
        var status = 200
        var body: [UInt8]
        var contentType = "application/json"
        var exit = ExitCode.success
    }

    /// An endpoint: its method, the audit line its operation writes, what the rules judge (a
    /// reply instead when the request is malformed), and the operation.
    struct Route: Sendable {
        let method: String
        var audit: AuditOperation?
        let judged: @Sendable (inout Request) -> Result<AgentRules.Operation, RouteRefusal>
        let serve: @Sendable (Request, Context) throws -> Answer
    }

    struct RouteRefusal: Error {
        let message: String
        var hint: String?
    }

    static let routes: [String: Route] = {
        var routes: [String: Route] = [
            "/v1/token": Route(method: "GET", audit: .token, judged: { .success(.token(environment: $0.account)) }) {
                _, context in
                Answer(body: Array((SessionOutput.json(try context.usableSession()) + "\n").utf8))
            },
            "/v1/exec-credential": Route(
                method: "GET", audit: .execCredential, judged: { .success(.token(environment: $0.account)) }
            ) { request, context in
                let info = request.query["apiVersion"].map { JSONValue.object(["apiVersion": .string($0)]).serialized }
                let version = try ExecCredential.apiVersion(execInfo: info)
                return Answer(body: ExecCredential.document(try context.usableSession(), apiVersion: version))
            },
            "/v1/status": Route(method: "GET", judged: { _ in .success(.status) }) { _, context in
                Answer(body: Array((JSONValue.object(try Status.run(context)).serialized + "\n").utf8))
            },
            "/v1/list": Route(method: "GET", judged: { _ in .success(.list) }) { _, context in
                Answer(body: Array((try List.run(context).serialized + "\n").utf8))
            },
            // Judged as a write: dropping the agent's keys makes the next request ask the store
            // again, which only a caller that may change the store should be able to cause.
            "/v1/lock": Route(method: "POST", judged: { _ in .success(.write) }) { _, context in
                Lock.dropHere(context)
                return Answer(body: Array(#"{"dropped":true}"#.utf8) + [0x0a])
            },
            // capability reveals nothing: any caller a rule or the default lets read at all.
            "/v1/git/capability": Route(method: "POST", judged: { _ in .success(.status) }) { _, _ in
                Answer(body: Array(CapabilityCommand.text.utf8), contentType: "text/plain; charset=utf-8")
            },
            "/v1/git/get": Route(
                method: "POST", audit: .get, judged: { gitRequest(&$0, naming: { .gitGet(host: $0) }) }
            ) {
                request, context in
                let answer = try CredentialGet.run(try describe(request, context), context)
                return Answer(status: answer == nil ? 404 : 200, body: answer ?? [], contentType: gitType)
            },
            "/v1/git/store": Route(method: "POST", audit: .store, judged: { gitRequest(&$0, naming: nil) }) {
                request, context in
                try CredentialStore.run(try describe(request, context), context)
                return Answer(body: [], contentType: gitType)
            },
            "/v1/git/erase": Route(method: "POST", audit: .erase, judged: { gitRequest(&$0, naming: nil) }) {
                request, context in
                try CredentialErase.run(try describe(request, context), context)
                return Answer(body: [], contentType: gitType)
            },
        ]
        for (word, audit) in DockerCredentials.auditOperations {
            routes["/v1/docker/" + word] = Route(
                method: "POST", audit: audit,
                judged: { request in
                    switch word {
                    case "list": return .success(.list)
                    case "get":
                        guard let registry = dockerRegistry(request.body) else {
                            return .failure(RouteRefusal(message: "the Docker request names no server URL"))
                        }
                        return .success(.dockerGet(registry: registry))
                    default: return .success(.write)
                    }
                }
            ) { request, context in
                // Docker's conventions, as the helper keeps them: the error on stdout, one line, exit 1.
                do {
                    return Answer(body: try DockerCredentials.run(word, input: request.body, context))
                } catch {
                    context.recordAudit(error: error, exitCode: 1)
                    let failure = error as? DockerCredentials.Failure
                    let message = failure?.message ?? TerminalText.escaped(CLIError(error).message)
                    return Answer(
                        status: failure.map { $0.isNotFound ? 404 : 400 } ?? status(of: error),
                        body: Array((message + "\n").utf8), contentType: gitType, exit: DockerCredentials.failed)
                }
            }
        }
        return routes
    }()

    private static let gitType = "text/plain; charset=utf-8"

    /// A git request's body read as the credential protocol, judged as a `get` of its host
    /// (`naming`) or as a write.
    private static func gitRequest(
        _ request: inout Request, naming operation: ((String) -> AgentRules.Operation)?
    ) -> Result<AgentRules.Operation, RouteRefusal> {
        guard let parsed = try? CredentialProtocol.parse(request.body) else {
            return .failure(RouteRefusal(message: "the git request is not in git's credential protocol"))
        }
        request.credential = parsed
        guard let operation else { return .success(.write) }
        guard let host = parsed.host?.gitHost.lowercased() else {
            return .failure(
                RouteRefusal(message: "the git request names no host", hint: "send protocol=… and host=… lines"))
        }
        return .success(operation(host))
    }

    /// The request's credential, named in the audit line and matched by `credential.<url>.interactive`.
    private static func describe(_ request: Request, _ context: Context) throws -> CredentialRequest {
        guard let credential = request.credential else { throw CLIError.usage("the git request is empty") }
        context.audit?.describe(credential)
        context.promptURL = PromptRules.credentialURL(credential)
        return credential
    }

    /// The bound on a request body to the agent's own endpoints (a git or Docker request).
    static let maximumBodyBytes = 65_536

    /// Whether a path is one of the agent's own (`/v1/…`); every other is the Portal API's.
    static func isAgentPath(_ path: Substring) -> Bool {
        path == "/v1" || path.hasPrefix("/v1/")
    }

    /// Serves a request to one of the agent's endpoints on the streaming server: its body read
    /// whole, within `maximumBodyBytes` (413 past it), then answered.
    func serve(
        _ request: HTTPServerRequest, _ exchange: any LocalExchange, caller: CallerIdentity, socket: AgentRules.Socket
    ) {
        var request = request
        let body: [UInt8]?
        do {
            // A declared length past the bound is refused before a byte of the body is read.
            let declared = request.headers.value(for: "Content-Length").flatMap { Int($0) }
            body =
                declared.map { $0 > Self.maximumBodyBytes } == true
                ? nil : try exchange.readBody(limit: Self.maximumBodyBytes)
        } catch {
            // The client left or broke the framing; the server tells it, if it can.
            return
        }
        guard let body else {
            try? exchange.answer(.text(413, "the request body is larger than the agent takes"))
            return
        }
        request.body = body
        defer { zeroize(&request.body) }
        let reply = answer(request, caller: caller, socket: socket, waiting: exchange.informAsking(milliseconds:))
        if reply.refused {
            exchange.refuse(reply.response)
        } else {
            try? exchange.answer(reply.response)
        }
    }

    /// An answer, and whether it refuses the request (the connection then ends after it).
    struct Reply {
        var response: HTTPServerResponse
        var refused: Bool
    }

    /// `waiting` hears how long the request may wait when it waits for the user's answer.
    func answer(
        _ request: HTTPServerRequest, caller: CallerIdentity, socket: AgentRules.Socket,
        waiting: (Int64) -> Void = { _ in }
    ) -> Reply {
        let path = request.path
        if path == "/v1/refusals" { return refusals(request, caller: caller, socket: socket) }
        if path == "/v1/consent" || path.hasPrefix("/v1/consent/") {
            return consent(request, caller: caller, socket: socket)
        }
        guard let route = Self.routes[String(path)] else {
            return Self.refusal(
                404, "no such endpoint: \(path.prefix(64))", hint: "see 'man portal-token', \"The agent\"")
        }
        if let wrong = Self.wrongMethod(request, path, takes: route.method) { return wrong }
        let query = Self.query(request.query)
        if let environmentID = query["env"], !AgentConnection.isSafeWord(environmentID) {
            return Self.refusal(400, "the env parameter holds characters an environment ID never has", hint: nil)
        }
        if let endUserID = query["endUser"], !AgentConnection.isSafeWord(endUserID.filter { $0 != "@" && $0 != "+" }) {
            return Self.refusal(400, "the endUser parameter holds characters an end user ID never has", hint: nil)
        }
        let account =
            (query["env"] ?? defaultEnvironmentID)
            + ((query["endUser"] ?? (query["env"] == nil ? defaultEndUserID : nil)).map { "/" + $0 } ?? "")
        var routed = Request(query: query, body: request.body, account: account)
        let operation: AgentRules.Operation
        switch route.judged(&routed) {
        case .success(let judged): operation = judged
        case .failure(let refusal): return Self.refusal(400, refusal.message, hint: refusal.hint)
        }
        let decision = policy.admit(operation, for: caller, on: socket, waiting: waiting)
        guard decision.allowed else {
            return refused(request, operation, route: route, decision, caller: caller, socket: socket)
        }
        let answer = running.withLock { _ in serve(route, routed, caller: caller, socket: socket) }
        if verbose || answer.status >= 500 {
            log(
                "portal-token agent: \(request.method) \(path) on the \(socket.rawValue) socket for \(caller): "
                    + "\(answer.status), exit \(answer.exit.rawValue)")
        }
        return Reply(
            response: HTTPServerResponse(
                status: answer.status,
                headers: [
                    HTTPHeader(AgentConnection.exitHeader, String(answer.exit.rawValue)),
                    HTTPHeader("Content-Type", answer.contentType), HTTPHeader("Cache-Control", "no-store"),
                ], body: answer.body), refused: false)
    }

    /// Runs a route's operation with a context of its own: the agent's settings with the
    /// request's account, its audit line naming the caller at the other end of the socket.
    private func serve(_ route: Route, _ request: Request, caller: CallerIdentity, socket: AgentRules.Socket)
        -> Answer
    {
        var flags: [String: String] = [:]
        if let environmentID = request.query["env"], let flag = Setting.authEnvironmentID.flag {
            flags[flag] = environmentID
        }
        if let endUserID = request.query["endUser"], let flag = Setting.endUser.flag { flags[flag] = endUserID }
        var context: Context?
        do {
            let settings = try Settings.load(flags: flags, environment: environment)
            try settings.checkValues()
            let made = Context(
                streams: services.streams, environment: environment, settings: settings,
                programName: "portal-token", services: services.services)
            made.audit = route.audit.map(AuditDraft.init)
            made.audit?.caller = services.services.auditCaller(caller, socket: socket.rawValue)
            context = made
            do {
                let answer = try route.serve(request, made)
                made.recordAudit(error: nil, exitCode: answer.exit.rawValue)
                return answer
            } catch let error as StoreError {
                throw made.namingTheProvider(error)
            }
        } catch {
            let failure = CLIError(error)
            context?.recordAudit(error: error, exitCode: failure.exitCode.rawValue)
            let response = HTTPServerResponse.failure(
                Self.status(of: error), failure.message, hint: failure.hint, exit: failure.exitCode)
            return Answer(
                status: response.status, body: response.body, contentType: Self.gitType, exit: failure.exitCode)
        }
    }

    /// The HTTP status of an operation's error, by what failed: no session is 404, a request
    /// the operation cannot take 400, Portal out of reach 502, the store 503.
    static func status(of error: any Error) -> Int {
        switch error {
        case SessionError.notSignedIn, SessionError.ended: return 404
        case SessionError.network, SessionError.checkFailed: return 502
        case is SettingError: return 400
        case let error as CLIError where error.exitCode == .usage: return 400
        default: return 503
        }
    }

    /// The questions the agent waits on and the answers it keeps (docs/agent.md, "Asking the
    /// user"), to the agent's own user only: `GET /v1/consent` lists the open questions,
    /// `POST /v1/consent/answer` answers one (`{"id","answer":"allow"|"deny"}`), and
    /// `POST /v1/consent/forget` drops every kept answer. A caller a rule asks about can never
    /// answer for itself, unless it is the agent's own user outside any sandbox.
    private func consent(_ request: HTTPServerRequest, caller: CallerIdentity, socket: AgentRules.Socket) -> Reply {
        let path = String(request.path)
        let method = path == "/v1/consent" ? "GET" : "POST"
        guard ["/v1/consent", "/v1/consent/answer", "/v1/consent/forget"].contains(path) else {
            return Self.refusal(
                404, "no such endpoint: \(path.prefix(64))", hint: "see 'man portal-token', \"The agent\"")
        }
        if let wrong = Self.wrongMethod(request, path, takes: method) { return wrong }
        guard policy.isOwnUser(caller, on: socket) else {
            return Self.refusal(
                403,
                "only the agent's own user, on the main socket and outside any sandbox, may see or answer its "
                    + "questions", hint: "run 'portal-token approve' on the agent's host, or over ssh to it")
        }
        guard let broker = policy.consent else {
            return Self.refusal(503, "this agent asks no questions", hint: nil)
        }
        let body: JSONValue
        switch path {
        case "/v1/consent":
            let now = MonotonicClock.milliseconds()
            body = .object(["questions": .array(broker.pending.map { $0.json(now: now) })])
        case "/v1/consent/answer":
            guard let object = try? JSONValue.parse(request.body), let id = object["id"]?.stringValue,
                let answer = object["answer"]?.stringValue.flatMap(ConsentMemory.Answer.init(rawValue:))
            else {
                return Self.refusal(
                    400, "the answer is not {\"id\":…,\"answer\":\"allow\"|\"deny\"}", hint: nil)
            }
            guard broker.answer(id, answer, by: "portal-token approve") else {
                return Self.refusal(
                    404, "no question \(id.prefix(32)) is waiting: it was answered, or its time passed",
                    hint: "'portal-token approve' lists the questions that wait")
            }
            body = .object(["answered": .string(answer.rawValue)])
        default:
            let forgotten = broker.forget()
            log("portal-token agent: forgot " + ConsentBroker.counted(forgotten))
            body = .object([
                "approvals": .int(Int64(forgotten.approvals)), "refusals": .int(Int64(forgotten.refusals)),
            ])
        }
        return Self.jsonReply(body)
    }

    /// The 405 for a request to `path` that does not use `method` (HEAD goes with GET); nil when
    /// it does.
    private static func wrongMethod(_ request: HTTPServerRequest, _ path: some StringProtocol, takes method: String)
        -> Reply?
    {
        guard request.method != method, method != "GET" || request.method != "HEAD" else { return nil }
        var reply = refusal(405, "\(path) takes \(method)", hint: nil)
        reply.response.headers.append(HTTPHeader("Allow", method))
        return reply
    }

    /// A 200 of the agent's own endpoints, `value` as its body.
    private static func jsonReply(_ value: JSONValue) -> Reply {
        Reply(
            response: HTTPServerResponse(
                status: 200,
                headers: [
                    HTTPHeader(AgentConnection.exitHeader, "0"), HTTPHeader("Content-Type", "application/json"),
                    HTTPHeader("Cache-Control", "no-store"),
                ], body: Array((value.serialized + "\n").utf8)), refused: false)
    }

    /// The last refusals, for `agent --check-rules`: to the agent's own user only.
    private func refusals(_ request: HTTPServerRequest, caller: CallerIdentity, socket: AgentRules.Socket) -> Reply {
        if let wrong = Self.wrongMethod(request, "/v1/refusals", takes: "GET") { return wrong }
        guard policy.isOwnUser(caller, on: socket) else {
            return Self.refusal(
                403, "only the agent's own user, on the main socket, may read the agent's refusals",
                hint: "run 'portal-token agent --check-rules' on the agent's host")
        }
        return Self.jsonReply(.object(["refusals": .array(policy.recent.all.map(\.json))]))
    }

    /// A request the rules refused: remembered for `--check-rules`, logged and audited within
    /// the throttle, and answered 403 with the rule that would admit it.
    private func refused(
        _ request: HTTPServerRequest, _ operation: AgentRules.Operation, route: Route, _ decision: AgentRules.Decision,
        caller: CallerIdentity, socket: AgentRules.Socket
    ) -> Reply {
        policy.remember(operation, for: caller, on: socket, decidedBy: decision.decidedBy, time: Int64(time(nil)))
        let suggestion = decision.ask == nil ? policy.suggestionLines(for: operation, caller: caller, on: socket) : ""
        // Lines of refusals are throttled: no caller can push served lines out of the log.
        if case .write(let unwritten) = RefusalAudit.admit(.named) {
            if let audited = route.audit {
                var event = AuditEvent(
                    operation: audited, outcome: .refused, exitCode: ExitCode.storage.rawValue,
                    caller: services.services.auditCaller(caller, socket: socket.rawValue),
                    authEnvironmentID: { if case .token(let id) = operation { return id } else { return nil } }(),
                    host: { if case .gitGet(let host) = operation { return host } else { return nil } }())
                event.unwrittenRefusals = unwritten
                running.withLock { _ in recordAudit(event) }
            }
            log(
                "portal-token agent: refused \(request.method) \(request.path) on the \(socket.rawValue) socket "
                    + "for \(caller) (\(decision.decidedBy): \(decision.reason))" + RefusalAudit.unloggedNote(unwritten)
            )
            for line in CallerPolicy.logged(suggestion) { log(line) }
        }
        var reply = Self.refusal(
            403, "the agent refused \(operation): \(decision.reason) (decided by \(decision.decidedBy))",
            hint: decision.ask == nil ? Self.refusalHint(decision.decidedBy) : Self.askedHint, more: suggestion)
        reply.response.headers.append(HTTPHeader("Portal-Token-Decided-By", decision.decidedBy))
        return reply
    }

    /// What a caller refused by a rule that asks can do about it.
    static let askedHint =
        "the rule asks the agent's user: answer on the desktop or with 'portal-token approve' while the request "
        + "waits; 'portal-token agent --forget' drops the answers kept"

    /// What a refused caller can do about it, by what refused it.
    static func refusalHint(_ decidedBy: String) -> String {
        switch decidedBy {
        case "restricted socket": return "store and erase on the agent's host, or through its main socket"
        case "identity":
            return "no rule serves such a caller: connect from the process that speaks, and run it in the "
                + "cgroup its engine or systemd made (see 'man portal-token-agent.rules', IDENTITY)"
        default:
            return "a rule in the agent's rules file can allow it (see 'man portal-token-agent.rules'; "
                + "'portal-token agent --check-rules' checks the file and shows the rule for each refusal)"
        }
    }

    /// An answer the agent makes itself, with exit code 4 for a refusal (the client cannot reach
    /// the store) and 2 for a malformed request.
    static func refusal(_ status: Int, _ message: String, hint: String?, more: String = "") -> Reply {
        let exit: ExitCode = status == 400 || status == 404 || status == 405 ? .usage : .storage
        return Reply(response: .failure(status, message, hint: hint, exit: exit, more: more), refused: true)
    }

    /// `a=b&c=d`, percent-decoded; a key given twice keeps its first value.
    static func query(_ text: Substring?) -> [String: String] {
        guard let text else { return [:] }
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = PercentCoding.decodeStrictly(Array(parts[0].utf8)[...], plusAsSpace: true),
                let value = PercentCoding.decodeStrictly(
                    Array((parts.count > 1 ? parts[1] : "").utf8)[...], plusAsSpace: true)
            else { continue }
            let name = String(decoding: key, as: UTF8.self)
            if result[name] == nil { result[name] = String(decoding: value, as: UTF8.self) }
        }
        return result
    }

    /// The registry a Docker `get` names: its server URL's host.
    static func dockerRegistry(_ body: [UInt8]) -> String? {
        let text = String(decoding: body, as: UTF8.self).trimmingWhitespace
        guard !text.isEmpty, let request = try? DockerCredentials.request(for: text), let host = request.host
        else { return nil }
        return host.gitHost.lowercased()
    }
}
