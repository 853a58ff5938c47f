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
        Clients: PORTAL_TOKEN_AGENT_SOCK=PATH (or --agent-socket PATH) makes get, store,
        erase, token, exec, exec-credential, status, list and the Docker helper use the
        agent; or curl --unix-socket PATH http://localhost/v1/token.

        Refusals, and with --verbose every request, are logged on stderr. SIGTERM or SIGINT
        stop it; with --idle-exit it stops once no client has connected for that long.
        """

    static let rulesFileName = "agent.rules"

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
        let rules = try loadRules(context)
        let streams = context.streams
        let log: @Sendable (String) -> Void = { streams.printError($0) }
        let placement = CgroupPlacement(
            path: (try? FileReading.contents(of: "/proc/self/cgroup", limit: 65_536)).flatMap { bytes in
                String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("0::") }
                    .map { String($0.dropFirst(3)) }
            })
        // The settings flags the agent was started with hold for every request it runs, the
        // Docker helper's included (which reads no flags): as their environment variables.
        var requestEnvironment = environment
        for setting in Setting.flagged where setting != .agentSocket && setting.option?.value != nil {
            if let flag = setting.flag, let value = context.settings.flags[flag], let name = setting.environment {
                requestEnvironment[name] = value
            }
        }
        let router = AgentRouter(
            rules: rules, environment: requestEnvironment,
            defaultEnvironmentID: context.settings.value(.authEnvironmentID)?.trimmingWhitespace,
            services: context.services, agentUID: getuid(),
            agentPlacement: placement, verbose: context.isTracing, log: log,
            recordAudit: { [auditLog = AuditLogBox(context.auditLog())] event in auditLog.log?.record(event) })
        try context.services.serveAgent(
            AgentServeOptions(
                mainSocketPath: main, restrictedSocketPath: restricted,
                idleExitMilliseconds: idleExitSeconds.map { Int64($0) * 1000 }, log: log),
            { request, caller, socket in router.answer(request, caller: caller, socket: socket) })
    }

    /// The rules file: none is no rules (the default alone); one that others may write is
    /// refused, since it decides who gets the token.
    private func loadRules(_ context: Context) throws -> AgentRules {
        let path =
            rulesPath ?? context.xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/"
            + Self.rulesFileName
        let bytes: [UInt8]
        do {
            bytes = try FileReading.contents(of: path, limit: 1 << 20, ownOnly: true)
        } catch .missing where rulesPath == nil {
            return AgentRules()
        } catch .writableByOthers(let mode) {
            throw CLIError.usage(
                "cannot use the rules file \(path): others may write to it (mode \(String(mode, radix: 8)))",
                hint: "restrict it with 'chmod go-w \(path)'")
        } catch .foreignOwner(let uid) {
            throw CLIError.usage("cannot use the rules file \(path): it belongs to uid \(uid)")
        } catch {
            throw CLIError.usage("cannot read the rules file \(path): \(PortalTokenCLI.describe(error))")
        }
        do {
            return try AgentRules.parse(String(decoding: bytes, as: UTF8.self))
        } catch {
            throw CLIError.usage(
                "the rules file \(path), line \(error.line): \(error.message)",
                hint: "see docs/agent.md, \"The rules file\"")
        }
    }
}

/// The agent's own audit log, for the refusals it writes itself; used under the router's lock.
final class AuditLogBox: @unchecked Sendable {
    let log: (any AuditLog)?
    init(_ log: (any AuditLog)?) { self.log = log }
}
