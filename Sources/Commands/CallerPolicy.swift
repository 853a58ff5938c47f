import Basics
import Glibc
import PortalTokenCore

/// The rules file applied to the callers of a Unix socket: the agent's sockets and
/// `portal-token proxy --socket` (docs/agent.md, "The rules file"). One file and one evaluator,
/// `AgentRules`, decide for both, on the caller's kernel identity.
struct CallerPolicy: Sendable {
    static let rulesFileName = "agent.rules"

    let rules: AgentRules
    /// This process's uid: the default serves it alone.
    let agentUID: UInt32
    /// Where this process runs: a caller in the same container is served as this process's own.
    let agentPlacement: CgroupPlacement
    /// What the default lets this process's own user send through a proxy: the client API,
    /// or what `portal-token proxy --allow-method` and `--allow-path` chose.
    var defaultProxy: AgentRules.Grant = .proxy(methods: [], prefixes: [])

    func decide(_ operation: AgentRules.Operation, for caller: CallerIdentity, on socket: AgentRules.Socket)
        -> AgentRules.Decision
    {
        rules.decide(
            operation, for: caller, on: socket, agentUID: agentUID, agentPlacement: agentPlacement,
            defaultProxy: defaultProxy)
    }

    /// The rules file (`rulesPath`, else `$XDG_CONFIG_HOME/portal-token/agent.rules`) with this
    /// process's uid and cgroup. No file is no rules (the default alone); one that others may
    /// write, or that sits in a directory others may write (they could put another file in its
    /// place), is refused, since it decides who gets the token.
    static func load(_ context: Context, rulesPath: String?) throws -> CallerPolicy {
        let placement = CgroupPlacement(
            path: (try? FileReading.contents(of: "/proc/self/cgroup", limit: 65_536)).flatMap { bytes in
                String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("0::") }
                    .map { String($0.dropFirst(3)) }
            })
        return CallerPolicy(
            rules: try loadRules(context, rulesPath: rulesPath), agentUID: getuid(), agentPlacement: placement)
    }

    private static func loadRules(_ context: Context, rulesPath: String?) throws -> AgentRules {
        let path =
            rulesPath ?? context.xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/"
            + Self.rulesFileName
        let directory = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        do {
            try PrivateDirectory.check(directory)
        } catch .foreignOwner(let uid) {
            throw CLIError.usage(
                "cannot use the rules file \(path): its directory \(directory) belongs to uid \(uid)",
                hint: "keep the rules file in a directory of your own")
        } catch .writableByOthers(let mode) {
            throw CLIError.usage(
                "cannot use the rules file \(path): others may write to its directory \(directory) "
                    + "(mode \(String(mode, radix: 8)))",
                hint: "restrict it with 'chmod go-w \(directory)'")
        } catch .cannotExamine(let number) {
            throw CLIError.usage(
                "cannot use the rules file \(path): its directory \(directory) cannot be examined: "
                    + String(cString: strerror(number)))
        }
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
            return try AgentRules.parse(bytes)
        } catch {
            throw CLIError.usage(
                "the rules file \(path), line \(error.line): \(error.message)",
                hint: "fix line \(error.line) of \(path); see docs/agent.md, \"The rules file\"")
        }
    }
}

extension Services {
    /// The audit caller of a socket's peer (the agent's and the proxy's lines, docs/audit.md,
    /// "Fields"): the kernel's identity of it, and the programs that started it.
    func auditCaller(_ identity: CallerIdentity, socket: String) -> AuditCaller {
        var caller = AuditCaller(identity, socket: socket)
        if identity.pidVerified { caller.parents = describeProcess(identity.pid).parents }
        return caller
    }
}
