import Basics
import Glibc
import PortalTokenCore

struct AgentCommand: Command {
    static let name = "agent"
    static let summary = "Serve the token and the credential store on a Unix socket, to containers and sandboxes"
    static let details = """
        Runs in the foreground, serving HTTP/1.1 on $XDG_RUNTIME_DIR/portal-token/agent.sock and,
        for forwarding into containers or over ssh, the read-only
        $XDG_RUNTIME_DIR/portal-token/agent-restricted.sock (sockets 0600 in a 0700 directory).
        Under systemd socket activation (portal-token-agent.socket) it serves the sockets it
        was given. Each caller is identified by the kernel (uid, pid, user namespace, cgroup,
        container, Flatpak app, systemd unit, executable), and the rules file
        ($XDG_CONFIG_HOME/portal-token/agent.rules) decides what it may do. Without a rule, the
        same user in the same user namespace, outside containers, may do everything on the main
        socket; every other caller, and everything on the restricted socket, is refused.

        Endpoints: GET /v1/token, /v1/status, /v1/exec-credential, /v1/list;
        POST /v1/git/get|store|erase|capability (git's credential protocol as the body);
        POST /v1/docker/get|store|erase|list (Docker's helper input as the body).
        Any other path is proxied to the Portal API with the session token added, as
        portal-token proxy does, for callers the rules allow (allow proxy; by default the
        same user may use the client API paths under /api/v3/clients/me).
        Clients: PORTAL_TOKEN_AGENT_SOCK=PATH (or --agent-socket PATH) makes get, store,
        erase, token, exec, exec-credential, status, list and the Docker helper use the
        agent; or curl --unix-socket PATH http://localhost/v1/token.

        Refusals (20 at once, then one every 6 seconds, the rest counted), and with --verbose
        every request, are logged on stderr; a refusal ends its connection. SIGTERM or SIGINT
        stop it; with --idle-exit it stops once no client has connected for that long.
        """

    let socketPath: String?
    let restrictedSocketPath: String?
    let rulesPath: String?
    let idleExitSeconds: Int?

    init(arguments: ParsedArguments) throws(CLIError) {
        socketPath = arguments.value(.agentSocketPath)
        restrictedSocketPath = arguments.value(.agentRestrictedSocketPath)
        rulesPath = arguments.value(.agentRules)
        if let text = arguments.value(.idleExit) {
            guard let seconds = Int(text), seconds > 0, seconds <= 86_400 else {
                throw .usage("--idle-exit takes a number of seconds from 1 to 86400")
            }
            idleExitSeconds = seconds
        } else {
            idleExitSeconds = nil
        }
    }

    /// `$XDG_RUNTIME_DIR/portal-token/NAME`: the socket paths every client and unit agree on.
    static func defaultSocketPath(_ name: String, environment: [String: String]) -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        return runtime + "/portal-token/" + name
    }

    func run(in context: Context) throws {
        let environment = context.environment
        // Under socket activation the sockets come from systemd, and no path is needed.
        let main = socketPath ?? Self.defaultSocketPath("agent.sock", environment: environment)
        let restricted =
            restrictedSocketPath ?? Self.defaultSocketPath("agent-restricted.sock", environment: environment)
        let policy = try CallerPolicy.load(context, rulesPath: rulesPath)
        let streams = context.streams
        let log: @Sendable (String) -> Void = { streams.printError($0) }
        // The settings flags the agent was started with hold for every request it runs, the
        // Docker helper's included (which reads no flags): as their environment variables.
        var requestEnvironment = environment
        for setting in Setting.flagged where setting != .agentSocket && setting.option?.value != nil {
            if let flag = setting.flag, let value = context.settings.flags[flag], let name = setting.environment {
                requestEnvironment[name] = value
            }
        }
        let router = AgentRouter(
            policy: policy, environment: requestEnvironment,
            // The account the agent's own runs would choose: its settings, else the one remembered.
            defaultEnvironmentID: (try? context.localAccountChoice())??.authEnvironmentID,
            services: context.services, verbose: context.isTracing, log: log,
            recordAudit: { [auditLog = AuditLogBox(context.auditLog())] event in auditLog.log?.record(event) })
        // Every other path is the Portal API's, proxied as `portal-token proxy` does, for the
        // callers the rules' `allow proxy` (or the default) lets through. The proxy reads the
        // session as the router's commands do: prompts ruled out, and keys cached where the agent
        // keeps them (its memory when the kernel keyring is refused).
        var proxyServices = context.services
        proxyServices.secretCache = proxyServices.agentSecretCache
        let proxyContext = Context(
            streams: context.streams, environment: router.environment, settings: context.settings,
            programName: context.programName, services: proxyServices)
        // An agent without Portal settings still serves its own endpoints; proxying says why not.
        let proxy = Result { () throws -> PortalProxy in
            try PortalProxy(
                rules: ProxyRules(
                    listener: .unixSocket, credential: nil, pathPrefixes: ["/"], userAgent: PortalProxy.userAgent),
                policy: policy, address: nil, context: proxyContext,
                sessions: try PortalProxy.ProxySessions(proxyContext), log: log)
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
