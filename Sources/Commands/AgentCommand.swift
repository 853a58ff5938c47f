import Basics
import Glibc
import Operations
import PortalTokenCore

struct AgentCommand: Command {
    static let name = "agent"
    static let summary = "Serve the token and the credential store on a Unix socket, to containers and sandboxes"
    static let details = """
        Runs in the foreground, serving HTTP/1.1 on
        $XDG_RUNTIME_DIR/portal-token/agent.sock and, for forwarding into containers or
        over ssh, the read-only $XDG_RUNTIME_DIR/portal-token/agent-restricted.sock
        (sockets 0600 in a 0700 directory). Under systemd socket activation
        (portal-token-agent.socket) it serves the sockets it was given. Each caller is
        identified by the kernel (uid, pid, user namespace, cgroup, container, Flatpak
        app, systemd unit, executable), and the rules file
        ($XDG_CONFIG_HOME/portal-token/agent.rules) decides what it may do. Without a
        rule, the same user in the same user namespace, outside containers, may do
        everything on the main socket; every other caller, and everything on the
        restricted socket, is refused. The restricted socket never stores, erases or
        locks, whatever a rule grants.

        Endpoints: GET /v1/token, /v1/status, /v1/exec-credential, /v1/list;
        POST /v1/lock; POST /v1/git/get|store|erase|capability (git's credential
        protocol as the body); POST /v1/docker/get|store|erase|list (Docker's helper
        input as the body); GET /v1/consent, POST /v1/consent/answer|forget (the
        questions of ask rules, for the agent's own user: portal-token approve). Any
        other path is proxied to the Portal API with the session token added, as
        portal-token proxy does, for callers the rules allow (allow proxy; by default
        the same user may use the client API paths under /api/v3/clients/me). The
        settings flags the agent is started with hold for every request it serves.

        Clients: PORTAL_TOKEN_AGENT_SOCK=PATH (or --agent-socket PATH) makes get, store,
        erase, token, exec, exec --proxy, exec-credential, api, refresh, status, list,
        lock, proxy and the Docker helper use the agent (api, refresh, proxy and
        exec --proxy through its proxy), with the same output and exit codes; login,
        redirect, verify-totp, logout, migrate, file-key and unlock are refused naming
        the agent (exit 4). A socket whose listener is another uid is refused before anything is
        sent (exit 4), as is an agent that cannot be reached or does not answer within
        agent-timeout-ms (10000). Or: curl --unix-socket PATH http://localhost/v1/token.

        Refusals (20 at once, then one every 6 seconds, the rest counted), and with
        --verbose every request, are logged on stderr; a refusal ends its connection. A
        refusal's answer and log line carry the rule that would admit that caller to
        that request alone. The rules file is read again when it changes, before the
        next request it judges; a file with a mistake keeps the rules read before in
        force and is logged once, naming its line. SIGTERM, SIGINT or SIGHUP stop the
        agent, and it removes the sockets it made. --idle-exit takes 1 to 86400 seconds.

        A rule's ask line (ask token ENV, ask git-get HOST, ask proxy …) holds the
        request while the agent asks its user: a desktop notification with Allow and
        Deny (org.freedesktop.Notifications), and portal-token approve in a terminal.
        The answer is kept for that caller as the kernel names it for the rule's
        remember IDLE CAP (10m and 12h by default); no answer within ask-timeout-ms
        (30000) is 403 "not approved", with nothing kept. Clients in client mode wait
        for it (the agent sends 102 Processing first).

        It will not start (exit 2) with a rules file, or a directory holding it, that is
        another user's or that others may write to, nor with a rules file that has a
        line that is not UTF-8 or holds a control character (a tab aside, and a CR right
        before the LF), or a rule with no condition (write any-caller for a rule that
        applies to every caller): the error names the line. Nor will it start (exit 4)
        in a socket directory another user owns or may write to; it replaces a socket
        only when it is a stale one of the user's own. Under systemd the agent does not
        see variables exported in a shell: put settings in ~/.config/portal-token/config
        (or use systemctl --user set-environment, or a drop-in).

        With --check-rules it serves nothing: it reads the rules file (FILE, else
        --rules, else the default) as the agent does and reports a mistake naming its
        line (exit 2); then it asks the agent on --socket (default the main socket) for
        the refusals it keeps in memory (the last 32, from GET /v1/refusals, served to
        the agent's own user alone), and says for each which rule of the file decides it
        now and prints the rule that would admit it. No agent answering: it says so,
        exit 0.

        With --check-rules --caller it judges the caller described instead (its fields
        separated by spaces or commas; gid=N is taken too; the uid is yours and the
        socket main unless named), asking what --asks names: it prints the rule that
        decides and, when refused, the rule that would admit it; exit 0 allowed,
        1 refused or asked (a rule that asks the user first says so). The rules file's
        syntax: man portal-token-agent.rules.

        With --forget it serves nothing: it makes the agent on --socket (default the
        main socket) drop every answer to its questions that it keeps (portal-token
        approve answers them), so that each caller is asked again.
        """

    let socketPath: String?
    let restrictedSocketPath: String?
    let rulesPath: String?
    let idleExitSeconds: Int?
    /// `--check-rules`: the file to check (nil: `--rules`, else the default), instead of serving.
    let checkRules: Bool
    let checkedFile: String?
    /// `--caller` and `--asks`: a described caller to judge.
    let describedCaller: String?
    let describedRequest: String?
    /// `--forget`: ask the running agent to drop the answers it keeps, instead of serving.
    let forget: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        socketPath = arguments.value(.agentSocketPath)
        restrictedSocketPath = arguments.value(.agentRestrictedSocketPath)
        rulesPath = arguments.value(.agentRules)
        checkRules = arguments.has(.checkRules)
        checkedFile = arguments.operands.first
        describedCaller = arguments.value(.checkedCaller)
        describedRequest = arguments.value(.checkedRequest)
        forget = arguments.has(.forget)
        if (checkedFile != nil || describedCaller != nil) && !checkRules {
            throw .usage(
                "'agent' takes a FILE and --caller only with --check-rules", hint: "see 'portal-token agent --help'")
        }
        if describedRequest != nil && describedCaller == nil {
            throw .usage("--asks describes what a --caller asks", hint: "give --caller too")
        }
        if let text = arguments.value(.idleExit) {
            guard let seconds = Int(text), seconds > 0, seconds <= 86_400 else {
                throw .usage("--idle-exit takes a number of seconds from 1 to 86400")
            }
            idleExitSeconds = seconds
        } else {
            idleExitSeconds = nil
        }
    }

    func run(in context: Context) throws {
        if checkRules { return try RulesCheck(command: self).run(in: context) }
        if forget {
            let agent = try Consent.agent(context, socketPath: socketPath)
            let forgotten = try Consent.forget(agent)
            context.streams.printError(
                "portal-token: the agent on \(agent.socketPath) forgot " + ConsentBroker.counted(forgotten))
            return
        }
        let environment = context.environment
        // Under socket activation the sockets come from systemd, and no path is needed.
        let main = socketPath ?? AgentConnection.defaultSocketPath("agent.sock", environment: environment)
        let restricted =
            restrictedSocketPath ?? AgentConnection.defaultSocketPath("agent-restricted.sock", environment: environment)
        let streams = context.streams
        let log: @Sendable (String) -> Void = { streams.printError($0) }
        var policy = try CallerPolicy.load(context, rulesPath: rulesPath, report: log)
        policy.consent = ConsentBroker(
            boundMilliseconds: try context.settings.milliseconds(
                .askTimeout, default: ConsentBroker.defaultBoundMilliseconds),
            desktop: context.services.askOnDesktop, log: log)
        // The settings flags the agent was started with hold for every request it runs, the
        // Docker helper's included (which reads no flags): as their environment variables.
        var requestEnvironment = environment
        for setting in Setting.flagged where setting != .agentSocket && setting.option?.value != nil {
            if let flag = setting.flag, let value = context.settings.flags[flag], let name = setting.environment {
                requestEnvironment[name] = value
            }
        }
        let ownAccount = (try? context.localAccountChoice()) ?? nil
        let router = AgentRouter(
            policy: policy, environment: requestEnvironment,
            // The account the agent's own runs would choose: its settings, else the one remembered.
            defaultEnvironmentID: ownAccount?.authEnvironmentID
                ?? context.settings.value(.authEnvironmentID)?.trimmingWhitespace,
            defaultEndUserID: ownAccount?.endUserID,
            services: context.services.agentServices?() ?? context.services, streams: streams,
            verbose: context.isTracing, log: log,
            recordAudit: { [auditLog = AuditLogBox(context.auditLog())] event in auditLog.log?.record(event) })
        // Every other path is the Portal API's, proxied as `portal-token proxy` does, for the
        // callers the rules' `allow proxy` (or the default) lets through. The proxy reads the
        // session as the router's commands do: prompts ruled out, and keys cached where the agent
        // keeps them (its memory when the kernel keyring is refused).
        let proxyServices = context.services.agentServices?() ?? context.services
        let proxyContext = Context(
            streams: context.streams, environment: router.environment, settings: context.settings,
            programName: context.programName, services: proxyServices)
        // An agent without Portal settings still serves its own endpoints; proxying says why not.
        let proxy = Result { () throws -> PortalProxy in
            try PortalProxy(
                rules: ProxyRules(
                    listener: .unixSocket, credential: nil, pathPrefixes: ["/"], userAgent: PortalProxy.userAgent),
                policy: policy, address: nil, context: proxyContext,
                upstream: .portal(try PortalProxy.ProxySessions(proxyContext)), log: log)
        }.mapError { CLIError($0) }
        try context.services.serveAgent(
            AgentServeOptions(
                mainSocketPath: main, restrictedSocketPath: restricted,
                idleExitMilliseconds: idleExitSeconds.map { Int64($0) * 1000 }, log: log),
            { request, exchange, caller, socket in
                if AgentRouter.isAgentPath(request.path) {
                    router.serve(request, exchange, caller: caller, socket: socket)
                } else {
                    switch proxy {
                    case .success(let proxy): proxy.handle(request, exchange, caller, socket: socket)
                    case .failure(let error):
                        try? exchange.answer(
                            AgentRouter.refusal(
                                503, "the agent cannot proxy the Portal API: \(error.message)", hint: nil
                            ).response)
                    }
                }
            })
    }
}

/// The agent's own audit log, for the refusals it writes itself; used under the router's lock.
final class AuditLogBox: @unchecked Sendable {
    let log: (any AuditLog)?
    init(_ log: (any AuditLog)?) { self.log = log }
}

/// `portal-token agent --check-rules [FILE]` (docs/agent.md, "Letting a sandbox in"): the rules
/// file read as the agent reads it, then the agent's last refusals judged by it, each with the
/// rule that would admit its caller; or, with `--caller`, a caller described on the command line.
struct RulesCheck {
    let command: AgentCommand

    /// Which rule decides for the described caller and what it asks (exit 0 when it is allowed,
    /// 1 when it is refused), and the rule that would admit it.
    func judge(_ description: String, asking request: String?, by policy: CallerPolicy, _ context: Context) throws {
        var caller = CallerIdentity(uid: getuid(), gid: getgid(), pid: 0)
        var socket = AgentRules.Socket.main
        for field in description.split(whereSeparator: { $0 == " " || $0 == "," }) {
            let parts = field.split(separator: "=", maxSplits: 1).map(String.init)
            switch (parts[0], parts.count > 1 ? parts[1] : nil) {
            case ("uid", let value?) where UInt32(value) != nil: caller.uid = UInt32(value)!
            case ("gid", let value?) where UInt32(value) != nil: caller.gid = UInt32(value)!
            case ("cgroup", let value?) where value.hasPrefix("/"): caller.cgroup = value
            case ("exe", let value?) where value.hasPrefix("/"): caller.executable = value
            case ("user-namespace", "same"?): caller.sameUserNamespace = true
            case ("user-namespace", "other"?): caller.sameUserNamespace = false
            case ("flatpak-info", nil): caller.hasFlatpakInfo = true
            case ("socket", let value?) where AgentRules.Socket(rawValue: value) != nil:
                socket = AgentRules.Socket(rawValue: value)!
            default:
                throw CLIError.usage(
                    "--caller: '\(field.prefix(80))' is not uid=N, gid=N, cgroup=PATH, exe=PATH, "
                        + "user-namespace=same|other, flatpak-info or socket=main|restricted")
            }
        }
        let operation = try Self.operation(
            request ?? "token " + ((try context.localAccountChoice())?.authEnvironmentID ?? "*"))
        let decision = policy.decide(operation, for: caller, on: socket)
        let streams = context.streams
        streams.print("\(caller), asking \(operation) on the \(socket.rawValue) socket:")
        guard !decision.allowed else { return streams.print("  allowed by \(decision.decidedBy) of \(policy.path)") }
        if let ask = decision.ask {
            streams.print(
                "  asks the user first: \(decision.decidedBy)'s '\(ask.grant)' (an answer is kept "
                    + "\(ConsentBroker.duration(ask.remember.idleSeconds)) idle, "
                    + "\(ConsentBroker.duration(ask.remember.capSeconds)) at most)")
            throw SilentExit(code: .notSignedIn)
        }
        streams.print("  refused by \(decision.decidedBy): \(decision.reason)")
        switch policy.suggestion(for: operation, caller: caller, on: socket) {
        case .success(let suggestion):
            streams.print("  to admit it, \(suggestion.placement):")
            streams.write(Array(suggestion.text.utf8), to: streams.output)
        case .failure(let why):
            streams.print("  no rule is suggested: \(why.reason)")
        }
        throw SilentExit(code: .notSignedIn)
    }

    /// What `--asks` names, in the words of the rules file's grants.
    static func operation(_ text: String) throws(CLIError) -> AgentRules.Operation {
        let words = text.split(separator: " ").map(String.init)
        switch (words.first, words.count) {
        case ("token", 2): return .token(environment: words[1])
        case ("git-get", 2): return .gitGet(host: words[1].lowercased())
        case ("docker-get", 2): return .dockerGet(registry: words[1].lowercased())
        case ("status", 1): return .status
        case ("list", 1): return .list
        case ("write", 1): return .write
        case ("proxy", 3) where words[2].hasPrefix("/"): return .proxy(method: words[1].uppercased(), path: words[2])
        default:
            throw .usage(
                "--asks takes 'token ENV', 'git-get HOST', 'docker-get REGISTRY', 'status', 'list', 'write' "
                    + "or 'proxy METHOD PATH'")
        }
    }

    func run(in context: Context) throws {
        let path = command.checkedFile ?? command.rulesPath
        // A mistake is the agent's own error: the file, the line, and exit 2.
        var policy = try CallerPolicy.load(context, rulesPath: path)
        policy.path = CallerPolicy.path(context, rulesPath: path)
        let streams = context.streams
        if let description = command.describedCaller {
            return try judge(description, asking: command.describedRequest, by: policy, context)
        }
        let names = policy.rules.rules.map(\.name)
        if context.services.fileExists(policy.path) {
            streams.print(
                "\(policy.path): \(names.count) rule\(names.count == 1 ? "" : "s"), no mistakes"
                    + (names.isEmpty ? "" : " (\(names.joined(separator: ", ")))"))
        } else {
            streams.print("\(policy.path): no such file, so no rules: the default alone decides")
        }

        guard
            let socket = command.socketPath
                ?? AgentConnection.defaultSocketPath("agent.sock", environment: context.environment)
        else {
            streams.print("No agent to ask for its refusals: XDG_RUNTIME_DIR is not set (give --socket PATH).")
            return
        }
        let response: HTTPResponse
        let timeout = try context.settings.milliseconds(
            .agentTimeout, default: AgentConnection.defaultTimeoutMilliseconds)
        do {
            response = try context.services.agentExchange(
                socket, HTTPRequest(method: "GET", url: "/v1/refusals", body: nil), timeout)
        } catch {
            streams.print("No agent answers on \(socket) (\(error.message)), so no refusals to show.")
            return
        }
        guard response.status == 200, let object = try? JSONValue.parse(response.body),
            let records = object["refusals"]?.arrayValue
        else {
            let said = String(decoding: response.body, as: UTF8.self).split(separator: "\n").first.map(String.init)
            throw CLIError(
                "the agent on \(socket) did not give its refusals (HTTP \(response.status)"
                    + (said.map { ": \($0.prefix(200))" } ?? "") + ")",
                hint: "an agent older than this portal-token keeps none; restart it", exitCode: .storage)
        }
        let refusals = records.compactMap(RefusalRecord.init(json:))
        guard !refusals.isEmpty else {
            streams.print("The agent on \(socket) has refused no one since it started.")
            return
        }
        streams.print(
            "The agent on \(socket) refused \(refusals.count) caller\(refusals.count == 1 ? "" : "s") "
                + "since it started (newest last; it keeps the last \(RecentRefusals.capacity)):")
        for record in refusals {
            let decision = policy.decide(record.operation, for: record.caller, on: record.socket)
            streams.print("")
            streams.print(
                "\(RFC3339.format(record.time)): \(record.operation) on the \(record.socket.rawValue) socket, "
                    + "refused by \(record.decidedBy)")
            streams.print("  caller: \(record.caller)")
            if decision.allowed {
                streams.print(
                    "  now: \(decision.decidedBy) of \(policy.path) admits it")
                continue
            }
            streams.print("  now: still refused by \(decision.decidedBy): \(decision.reason)")
            switch policy.suggestion(for: record.operation, caller: record.caller, on: record.socket) {
            case .success(let suggestion):
                streams.print(
                    "  to admit it, \(suggestion.placement) (the agent reads the file again when it changes):")
                streams.write(Array(suggestion.text.utf8), to: streams.output)
            case .failure(let why):
                streams.print("  no rule is suggested: \(why.reason)")
            }
        }
    }
}
