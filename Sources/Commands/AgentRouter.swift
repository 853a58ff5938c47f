import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// What the agent does with one request (docs/agent.md, "The protocol"): decides it by the rules
/// from the caller's kernel identity, then runs the very command a local caller would run
/// (`token`, `get`, the Docker helper, …) in this process, its stdin the request body and its
/// stdout and stderr captured, and answers with what it printed. Exit codes travel in the
/// `Portal-Token-Exit` header, so a client exits as the local command would have.
final class AgentRouter: Sendable {
    /// The header that carries the command's exit code.
    static let exitHeader = "Portal-Token-Exit"

    let policy: CallerPolicy
    /// The environment every command runs with: the agent's own, prompts ruled out.
    let environment: [String: String]
    /// The environment a request without `?env=` gets: the agent's own setting (flag,
    /// variable or config file), which the rules judge `allow token` against.
    let defaultEnvironmentID: String
    /// The end user of the agent's own account, where it knows one.
    let defaultEndUserID: String?
    let verbose: Bool
    let log: @Sendable (String) -> Void
    /// One command at a time: the stores' adapters are not all safe to use from several threads,
    /// and a request takes milliseconds.
    private let running: Mutex<Void> = Mutex(())
    private let servicesBox: ServicesBox
    /// Writes a line to the agent's audit log (a refusal's; a command's own line is written by
    /// the command).
    private let recordAudit: @Sendable (AuditEvent) -> Void

    final class ServicesBox: @unchecked Sendable {
        let services: Services
        init(_ services: Services) { self.services = services }
    }

    init(
        policy: CallerPolicy, environment: [String: String], defaultEnvironmentID: String?,
        defaultEndUserID: String? = nil,
        services: Services,
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
        var services = services
        services.secretCache = services.agentSecretCache
        // Nor does a command it runs call an agent (a `lock` would call this one, which runs one
        // command at a time, and wait on itself).
        services.agentExchange = { path, _, _ throws(HTTPError) in throw .cannotConnect(host: path) }
        self.servicesBox = ServicesBox(services)
        self.verbose = verbose
        self.log = log
    }

    /// The endpoints: each one's method, the command it runs, and the operation the rules judge.
    private enum Endpoint {
        case token, status, execCredential, list, lock
        /// The last refusals, for `agent --check-rules`: to the agent's own user only.
        case refusals
        case git(String)
        case docker(String)
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
        let reply = answer(request, caller: caller, socket: socket)
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

    func answer(_ request: HTTPServerRequest, caller: CallerIdentity, socket: AgentRules.Socket) -> Reply {
        let path = request.path
        let endpoint: Endpoint
        let method: String
        switch path {
        case "/v1/token": (endpoint, method) = (.token, "GET")
        case "/v1/status": (endpoint, method) = (.status, "GET")
        case "/v1/exec-credential": (endpoint, method) = (.execCredential, "GET")
        case "/v1/list": (endpoint, method) = (.list, "GET")
        case "/v1/lock": (endpoint, method) = (.lock, "POST")
        case "/v1/refusals": (endpoint, method) = (.refusals, "GET")
        case "/v1/git/get", "/v1/git/store", "/v1/git/erase", "/v1/git/capability":
            (endpoint, method) = (.git(String(path.dropFirst("/v1/git/".count))), "POST")
        case "/v1/docker/get", "/v1/docker/store", "/v1/docker/erase", "/v1/docker/list":
            (endpoint, method) = (.docker(String(path.dropFirst("/v1/docker/".count))), "POST")
        default:
            return Self.refusal(
                404, "no such endpoint: \(path.prefix(64))", hint: "see 'man portal-token', \"The agent\"")
        }
        guard request.method == method || (method == "GET" && request.method == "HEAD") else {
            var reply = Self.refusal(405, "\(path) takes \(method)", hint: nil)
            reply.response.headers.append(HTTPHeader("Allow", method))
            return reply
        }
        let query = Self.query(request.query)
        if let environmentID = query["env"], !Self.isSafeWord(environmentID) {
            return Self.refusal(400, "the env parameter holds characters an environment ID never has", hint: nil)
        }
        if let endUserID = query["endUser"], !Self.isSafeWord(endUserID.filter { $0 != "@" && $0 != "+" }) {
            return Self.refusal(400, "the endUser parameter holds characters an end user ID never has", hint: nil)
        }

        if case .refusals = endpoint {
            guard policy.isOwnUser(caller, on: socket) else {
                return Self.refusal(
                    403, "only the agent's own user, on the main socket, may read the agent's refusals",
                    hint: "run 'portal-token agent --check-rules' on the agent's host")
            }
            let body = JSONValue.object(["refusals": .array(policy.recent.all.map(\.json))]).serialized + "\n"
            return Reply(
                response: HTTPServerResponse(
                    status: 200,
                    headers: [
                        HTTPHeader(Self.exitHeader, "0"), HTTPHeader("Content-Type", "application/json"),
                        HTTPHeader("Cache-Control", "no-store"),
                    ], body: Array(body.utf8)), refused: false)
        }

        // What the rules judge, and the command that answers.
        let operation: AgentRules.Operation
        var arguments: [String] = []
        var extraEnvironment: [String: String] = [:]
        var runsDockerHelper = false
        if let environmentID = query["env"] { arguments += ["--env", environmentID] }
        // The client's choice of end user, as its own run would make it (docs/agent.md, "Client mode").
        if let endUserID = query["endUser"] { arguments += ["--end-user=" + endUserID] }
        // The account the rules judge: the one asked for, else the agent's own choice.
        let account =
            (query["env"] ?? defaultEnvironmentID)
            + ((query["endUser"] ?? (query["env"] == nil ? defaultEndUserID : nil)).map { "/" + $0 } ?? "")
        switch endpoint {
        case .token:
            operation = .token(environment: account)
            arguments += ["token", "--format", "json"]
        case .execCredential:
            operation = .token(environment: account)
            arguments += ["exec-credential"]
            if let version = query["apiVersion"] {
                guard Self.isSafeWord(version) else {
                    return Self.refusal(400, "the apiVersion parameter is not an API version", hint: nil)
                }
                extraEnvironment["KUBERNETES_EXEC_INFO"] = JSONValue.object(["apiVersion": .string(version)]).serialized
            }
        case .status:
            operation = .status
            arguments += ["status"] + (query["format"] == "json" ? ["--format", "json"] : [])
        case .list:
            operation = .list
            arguments += ["list"] + (query["format"] == "json" ? ["--format", "json"] : [])
        case .refusals:
            // Answered above.
            operation = .status
        case .lock:
            // Judged as a write: dropping the agent's keys makes the next request ask the store
            // again, which only a caller that may change the store should be able to cause.
            operation = .write
            arguments += ["lock"]
        case .git(let word):
            switch word {
            case "get", "capability":
                guard let host = Self.gitHost(request.body) else {
                    if word == "capability" {
                        operation = .gitGet(host: "")
                        break
                    }
                    return Self.refusal(400, "the git request names no host", hint: "send protocol=… and host=… lines")
                }
                operation = .gitGet(host: host)
            default:
                operation = .write
            }
            arguments += [word]
        case .docker(let word):
            runsDockerHelper = true
            switch word {
            case "get":
                guard let registry = Self.dockerRegistry(request.body) else {
                    return Self.refusal(400, "the Docker request names no server URL", hint: nil)
                }
                operation = .dockerGet(registry: registry)
            case "list": operation = .list
            default: operation = .write
            }
            arguments = [word]
        }

        // capability reveals nothing: any caller a rule or the default lets read at all.
        let judged: AgentRules.Operation
        if case .gitGet(let host) = operation, host.isEmpty { judged = .status } else { judged = operation }
        let decision = policy.decide(judged, for: caller, on: socket)
        guard decision.allowed else {
            policy.remember(judged, for: caller, on: socket, decidedBy: decision.decidedBy, time: Int64(time(nil)))
            let suggestion = policy.suggestionLines(for: judged, caller: caller, on: socket)
            // Lines of refusals are throttled: no caller can push served lines out of the log.
            if case .write(let unwritten) = RefusalAudit.admit(.named) {
                if let audited = Self.auditOperation(endpoint) {
                    var event = AuditEvent(
                        operation: audited, outcome: .refused, exitCode: ExitCode.storage.rawValue,
                        caller: servicesBox.services.auditCaller(caller, socket: socket.rawValue),
                        authEnvironmentID: { if case .token(let id) = operation { return id } else { return nil } }(),
                        host: { if case .gitGet(let host) = operation { return host } else { return nil } }())
                    event.unwrittenRefusals = unwritten
                    running.withLock { _ in recordAudit(event) }
                }
                log(
                    "portal-token agent: refused \(request.method) \(path) on the \(socket.rawValue) socket "
                        + "for \(caller) (\(decision.decidedBy): \(decision.reason))"
                        + RefusalAudit.unloggedNote(unwritten))
                for line in Self.logged(suggestion) { log(line) }
            }
            var reply = Self.refusal(
                403, "the agent refused \(operation): \(decision.reason) (decided by \(decision.decidedBy))",
                hint: Self.refusalHint(decision.decidedBy), more: suggestion)
            reply.response.headers.append(HTTPHeader("Portal-Token-Decided-By", decision.decidedBy))
            return reply
        }

        var environment = self.environment
        environment.merge(extraEnvironment) { $1 }
        // The command's audit line names the caller at the other end of the socket.
        var services = servicesBox.services
        let openLog = services.auditLog
        let auditCaller = servicesBox.services.auditCaller(caller, socket: socket.rawValue)
        services.auditLog = { options in CallerStampedAuditLog(openLog(options), caller: auditCaller) }
        let result = running.withLock { _ in
            CapturedRun.run(input: request.body) { streams in
                if runsDockerHelper {
                    return DockerCredentialHelper.main(
                        arguments, streams: streams, environment: environment, services: services)
                }
                return PortalTokenCLI.execute(arguments, streams: streams, environment: environment, services: services)
            }
        }
        let status: Int
        switch (ExitCode(rawValue: result.exitCode), endpoint) {
        case (.success?, .git("get")) where result.output.isEmpty: status = 404
        case (.success?, _): status = 200
        case (.notSignedIn?, _), (.sessionEnded?, _): status = 404
        case (_, .docker(_)) where result.exitCode == 1:
            // Docker's helper says everything on stdout with exit 1; "not found" is one of them.
            status =
                String(decoding: result.output, as: UTF8.self).hasPrefix(DockerCredentialHelper.notFoundMessage)
                ? 404 : 503
        case (.usage?, _): status = 400
        default: status = 503
        }
        if verbose || status == 503 {
            log(
                "portal-token agent: \(request.method) \(path) on the \(socket.rawValue) socket for \(caller): "
                    + "\(status), exit \(result.exitCode)")
        }
        var headers = [HTTPHeader(Self.exitHeader, String(result.exitCode))]
        let body: [UInt8]
        if status == 200 || runsDockerHelper || (status == 404 && result.error.isEmpty) {
            body = result.output
            headers.append(HTTPHeader("Content-Type", Self.contentType(endpoint)))
            // What the command said on stderr (a warning) rides along, one header per line.
            for line in String(decoding: result.error, as: UTF8.self).split(separator: "\n").prefix(16) {
                headers.append(HTTPHeader("Portal-Token-Message", TerminalText.escaped(String(line.prefix(1024)))))
            }
        } else {
            body = result.error
            headers.append(HTTPHeader("Content-Type", "text/plain; charset=utf-8"))
        }
        headers.append(HTTPHeader("Cache-Control", "no-store"))
        return Reply(response: HTTPServerResponse(status: status, headers: headers, body: body), refused: false)
    }

    /// A refusal's suggestion as the agent logs it, one line each: the first marked as the
    /// agent's, the rule's own lines as they go in the file.
    static func logged(_ suggestion: String) -> [String] {
        let lines = suggestion.split(separator: "\n").map(String.init)
        guard let first = lines.first else { return [] }
        return ["portal-token agent: " + first.dropFirst("hint: ".count)] + lines.dropFirst()
    }

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

    /// The audit operation of an endpoint that hands out or changes a credential.
    private static func auditOperation(_ endpoint: Endpoint) -> AuditOperation? {
        switch endpoint {
        case .token: return .token
        case .execCredential: return .execCredential
        case .git("get"): return .get
        case .git("store"): return .store
        case .git("erase"): return .erase
        case .docker("get"): return .dockerGet
        case .docker("store"): return .dockerStore
        case .docker("erase"): return .dockerErase
        case .docker("list"): return .dockerList
        default: return nil
        }
    }

    private static func contentType(_ endpoint: Endpoint) -> String {
        switch endpoint {
        case .token, .execCredential, .docker: return "application/json"
        default: return "text/plain; charset=utf-8"
        }
    }

    /// An answer the agent makes itself, as the error funnel words one, with exit code 4 for a
    /// refusal (the client cannot reach the store) and 2 for a malformed request.
    static func refusal(_ status: Int, _ message: String, hint: String?, more: String = "") -> Reply {
        let exit: ExitCode = status == 400 || status == 404 || status == 405 ? .usage : .storage
        var text = "portal-token: error: \(message)\n"
        if let hint { text += "hint: \(hint)\n" }
        text += more
        let response = HTTPServerResponse(
            status: status,
            headers: [
                HTTPHeader(exitHeader, String(exit.rawValue)), HTTPHeader("Content-Type", "text/plain; charset=utf-8"),
            ], body: Array(text.utf8))
        return Reply(response: response, refused: true)
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

    /// Letters, digits and `-_.:/`: what environment IDs and API versions are made of.
    static func isSafeWord(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 256
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || Array("-_.:/".utf8).contains(byte)
            }
    }

    /// The host a git request names (`host=`, or the host of `url=`), lowercased.
    static func gitHost(_ body: [UInt8]) -> String? {
        guard let request = try? CredentialProtocol.parse(body), let host = request.host else { return nil }
        return host.gitHost.lowercased()
    }

    /// The registry a Docker `get` names: its server URL's host.
    static func dockerRegistry(_ body: [UInt8]) -> String? {
        let text = String(decoding: body, as: UTF8.self).trimmingWhitespace
        guard !text.isEmpty, let request = try? DockerCredentialHelper.request(for: text), let host = request.host
        else { return nil }
        return host.gitHost.lowercased()
    }
}

/// The agent's audit log for one request: every line names the caller at the other end of the
/// socket rather than the agent itself (docs/audit.md, "Fields").
final class CallerStampedAuditLog: AuditLog {
    let base: any AuditLog
    let caller: AuditCaller

    init(_ base: any AuditLog, caller: AuditCaller) {
        self.base = base
        self.caller = caller
    }

    func record(_ event: AuditEvent) {
        var event = event
        if event.caller == nil { event.caller = caller }
        base.record(event)
    }

    func lines() throws(AuditLogError) -> [String] { try base.lines() }
}

/// Runs a command in this process with its stdin holding given bytes and its stdout and stderr
/// captured, through pipes (so the command's code is the same as for a terminal's streams).
enum CapturedRun {
    struct Result {
        var exitCode: Int32
        var output: [UInt8]
        var error: [UInt8]
    }

    /// Linux's F_SETPIPE_SZ, which Swift's Glibc module does not export.
    private static let setPipeSize: Int32 = 1031

    static func run(input: [UInt8], _ body: (StandardStreams) -> Int32) -> Result {
        var inputPipe: [Int32] = [-1, -1], outputPipe: [Int32] = [-1, -1], errorPipe: [Int32] = [-1, -1]
        guard pipe(&inputPipe) == 0 else { return failure() }
        defer { _ = close(inputPipe[0]) }
        guard pipe(&outputPipe) == 0 else {
            _ = close(inputPipe[1])
            return failure()
        }
        guard pipe(&errorPipe) == 0 else {
            _ = close(inputPipe[1])
            _ = close(outputPipe[0])
            _ = close(outputPipe[1])
            return failure()
        }
        for descriptor in inputPipe + outputPipe + errorPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        // The request body fits the pipe whole (the server bounds it), so writing it never waits.
        _ = fcntl(inputPipe[1], setPipeSize, Int32(clamping: max(input.count + 1, 65_536)))
        StandardStreams().write(input, to: inputPipe[1])
        _ = close(inputPipe[1])

        // Two readers, so a command that prints more than a pipe holds never waits on this
        // thread; each writes a byte to `finished` once it has read to the end.
        guard let finished = CompletionPipe() else {
            for descriptor in [outputPipe[0], outputPipe[1], errorPipe[0], errorPipe[1]] { _ = close(descriptor) }
            return failure()
        }
        let collected = Mutex<([UInt8], [UInt8])>(([], []))
        for (index, descriptor) in [outputPipe[0], errorPipe[0]].enumerated() {
            let started = DetachedThread.start(stackBytes: 256 * 1024) {
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 16_384)
                while true {
                    let count = read(descriptor, &chunk, chunk.count)
                    if count < 0, errno == EINTR { continue }
                    if count <= 0 { break }
                    bytes += chunk[0..<count]
                }
                zeroize(&chunk)
                collected.withLock { if index == 0 { $0.0 = bytes } else { $0.1 = bytes } }
                zeroize(&bytes)
                _ = close(descriptor)
                finished.signal()
            }
            if !started {
                _ = close(descriptor)
                finished.signal()
            }
        }
        var streams = StandardStreams()
        streams.input = inputPipe[0]
        streams.output = outputPipe[1]
        streams.error = errorPipe[1]
        let exitCode = body(streams)
        _ = close(outputPipe[1])
        _ = close(errorPipe[1])
        // A program the command started (a hook) may still hold the pipes; not for long.
        var ended = 0
        let giveUpAt = MonotonicClock.milliseconds() + 2000
        while ended < 2, case let left = giveUpAt - MonotonicClock.milliseconds(), left > 0 {
            var readable = pollfd(fd: finished.read, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, Int32(left)) > 0 else { continue }
            var bytes = [UInt8](repeating: 0, count: 2)
            let count = read(finished.read, &bytes, 2 - ended)
            if count > 0 { ended += count }
        }
        let (output, error) = collected.withLock { value in
            defer {
                zeroize(&value.0)
                value.0 = []
            }
            return (value.0, value.1)
        }
        return Result(exitCode: exitCode, output: output, error: error)
    }

    /// The pipe the readers say they are done on; closed when the last of them (or the waiting
    /// thread, if they outlive its wait) lets go of it, so no write ever lands on a reused number.
    final class CompletionPipe: @unchecked Sendable {
        let read: Int32
        let write: Int32

        init?() {
            var descriptors: [Int32] = [-1, -1]
            guard pipe(&descriptors) == 0 else { return nil }
            for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            (read, write) = (descriptors[0], descriptors[1])
        }

        func signal() {
            var byte: UInt8 = 1
            _ = Glibc.write(write, &byte, 1)
        }

        deinit {
            _ = close(read)
            _ = close(write)
        }
    }

    private static func failure() -> Result {
        Result(
            exitCode: ExitCode.storage.rawValue, output: [],
            error: Array("portal-token: error: the agent could not make a pipe for the request\n".utf8))
    }
}
