import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// The rules file applied to the callers of a Unix socket: the agent's sockets and
/// `portal-token proxy --socket` (docs/agent.md, "The rules file"). One file and one evaluator,
/// `AgentRules`, decide for both, on the caller's kernel identity.
package struct CallerPolicy: Sendable {
    package static let rulesFileName = "agent.rules"

    /// The rules in force: the file's, read again when it changes.
    package let live: LiveRules
    package var rules: AgentRules { live.current() }
    /// This process's uid: the default serves it alone.
    package let agentUID: UInt32
    /// Where this process runs: a caller in the same container is served as this process's own.
    package let agentPlacement: CgroupPlacement
    /// What the default lets this process's own user send through a proxy: the client API,
    /// or what `portal-token proxy --allow-method` and `--allow-path` chose.
    package var defaultProxy: AgentRules.Grant = .proxy(methods: [], prefixes: [])
    /// The rules file these rules came from (it may not exist: then there are none).
    package var path: String = ""
    /// The last refusals, for `agent --check-rules` (`GET /v1/refusals`).
    package let recent = RecentRefusals()
    /// Who puts a rule's questions to the user: the agent's; nil elsewhere (`proxy --socket`),
    /// where a rule that asks refuses.
    package var consent: ConsentBroker?

    package func decide(_ operation: AgentRules.Operation, for caller: CallerIdentity, on socket: AgentRules.Socket)
        -> AgentRules.Decision
    {
        rules.decide(
            operation, for: caller, on: socket, agentUID: agentUID, agentPlacement: agentPlacement,
            defaultProxy: defaultProxy)
    }

    /// What `decide` says, once the user is asked when the rule that decides asks rather than
    /// allows (docs/agent.md, "Asking the user"). `waiting` hears, before the request waits for
    /// an answer, how many milliseconds it may wait at most.
    package func admit(
        _ operation: AgentRules.Operation, for caller: CallerIdentity, on socket: AgentRules.Socket,
        waiting: (Int64) -> Void = { _ in }
    ) -> AgentRules.Decision {
        var decision = decide(operation, for: caller, on: socket)
        guard let ask = decision.ask else { return decision }
        guard let consent else {
            decision.reason = "not approved: rule \(ask.rule) asks the user, which only the agent does"
            return decision
        }
        let outcome = consent.ask(ask, operation: operation, caller: caller) {
            waiting(Int64(consent.boundMilliseconds))
        }
        switch outcome {
        case .approved(let kept):
            return AgentRules.Decision(
                allowed: true, decidedBy: decision.decidedBy,
                reason: kept ? "approved by the user earlier" : "approved by the user")
        case .denied(let kept):
            decision.reason =
                "not approved: the user denied it"
                + (kept ? " (an answer kept from earlier; 'portal-token agent --forget' drops it)" : "")
        case .unanswered:
            decision.reason = "not approved: no answer within \(Self.seconds(consent.boundMilliseconds))"
        case .tooMany(let why):
            // Refused unasked: what helps is what helps any refusal.
            decision.reason = "not approved, and not asked: \(why)"
            decision.ask = nil
        case .unnamed:
            decision.reason =
                "not approved, and not asked: the caller's process could not be tied to its connection or its "
                + "mounts read, so no answer can be kept for it"
            decision.ask = nil
        }
        return decision
    }

    /// `30 s`, `2.5 s`: a bound in milliseconds, in seconds.
    static func seconds(_ milliseconds: Int) -> String {
        milliseconds % 1000 == 0
            ? "\(milliseconds / 1000) s" : "\(milliseconds / 1000).\((milliseconds % 1000) / 100) s"
    }

    /// The rules file (`rulesPath`, else `$XDG_CONFIG_HOME/portal-token/agent.rules`) with this
    /// process's uid and cgroup. No file is no rules (the default alone); one that others may
    /// write, or that sits in a directory others may write (they could put another file in its
    /// place), is refused, since it decides who gets the token.
    /// `report` hears of a changed file read again, or refused for a mistake.
    package static func load(
        _ context: Context, rulesPath: String?, report: @escaping @Sendable (String) -> Void = { _ in }
    )
        throws -> CallerPolicy
    {
        let placement = CgroupPlacement(
            path: (try? FileReading.contents(of: "/proc/self/cgroup", limit: 65_536)).flatMap { bytes in
                String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("0::") }
                    .map { String($0.dropFirst(3)) }
            })
        let path = Self.path(context, rulesPath: rulesPath)
        let required = rulesPath != nil
        let live = try LiveRules(path: path, report: report) {
            try loadRules(path: path, required: required)
        }
        return CallerPolicy(live: live, agentUID: getuid(), agentPlacement: placement, path: path)
    }

    /// `rulesPath`, else `$XDG_CONFIG_HOME/portal-token/agent.rules`.
    package static func path(_ context: Context, rulesPath: String?) -> String {
        rulesPath ?? context.xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/" + Self.rulesFileName
    }

    /// What a refused caller is told, and the agent logs, beside the refusal: the rule that would
    /// admit it, in the file's syntax, or why none can.
    package func suggestion(for operation: AgentRules.Operation, caller: CallerIdentity, on socket: AgentRules.Socket)
        -> Result<AgentRules.Suggestion, AgentRules.SuggestionUnavailable>
    {
        rules.suggestion(for: operation, caller: caller, on: socket, agentUID: agentUID, agentPlacement: agentPlacement)
    }

    /// The lines of a refusal's body after its hint: the rule that would admit the caller.
    package func suggestionLines(
        for operation: AgentRules.Operation, caller: CallerIdentity, on socket: AgentRules.Socket
    )
        -> String
    {
        switch suggestion(for: operation, caller: caller, on: socket) {
        case .success(let suggestion):
            return "hint: a rule that would admit this caller to this alone (\(suggestion.placement) at \(path), "
                + "where the agent reads it again before its next request):\n" + suggestion.text
        case .failure(let why):
            return "hint: no rule is suggested: \(why.reason)\n"
        }
    }

    /// Keeps a refusal for `agent --check-rules`.
    package func remember(
        _ operation: AgentRules.Operation, for caller: CallerIdentity, on socket: AgentRules.Socket,
        decidedBy: String, time: Int64
    ) {
        recent.add(
            RefusalRecord(time: time, caller: caller, operation: operation, socket: socket, decidedBy: decidedBy))
    }

    /// Whether `caller` is the agent's own user by the default (no rules): the one caller that
    /// may read the refusals the agent keeps.
    package func isOwnUser(_ caller: CallerIdentity, on socket: AgentRules.Socket) -> Bool {
        AgentRules().decide(.write, for: caller, on: socket, agentUID: agentUID, agentPlacement: agentPlacement)
            .allowed
    }

    /// The rules of the file at `path`; none when it is missing, unless it is `required`.
    package static func loadRules(path: String, required: Bool) throws -> AgentRules {
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
        } catch .missing where !required {
            return AgentRules()
        } catch .writableByOthers(let mode) {
            throw CLIError.usage(
                "cannot use the rules file \(path): others may write to it (mode \(String(mode, radix: 8)))",
                hint: "restrict it with 'chmod go-w \(path)'")
        } catch .foreignOwner(let uid) {
            throw CLIError.usage("cannot use the rules file \(path): it belongs to uid \(uid)")
        } catch {
            throw CLIError.usage("cannot read the rules file \(path): \(error.described())")
        }
        do {
            return try AgentRules.parse(bytes)
        } catch {
            throw CLIError.usage(
                "the rules file \(path), line \(error.line): \(error.message)",
                hint: "fix line \(error.line) of \(path); see 'man portal-token-agent.rules'")
        }
    }
}

/// The rules a policy judges by, read again from their file before the request they judge when
/// the file has changed (a new inode, size or time), been added or removed. A file with a mistake
/// keeps the last good rules in force and is reported once, naming its line.
package final class LiveRules: Sendable {
    private struct State {
        package var rules: AgentRules
        /// The version of the file last read or refused; nil when there was none.
        package var version: FileVersion?
    }

    package let path: String
    private let state: Mutex<State>
    private let read: @Sendable () throws -> AgentRules
    private let report: @Sendable (String) -> Void

    package init(
        path: String, report: @escaping @Sendable (String) -> Void,
        read: @escaping @Sendable () throws -> AgentRules
    ) throws {
        self.path = path
        self.read = read
        self.report = report
        let version = FileVersion.of(path)
        state = Mutex(State(rules: try read(), version: version))
    }

    /// The rules in force now: one `stat` when the file is as it was.
    package func current() -> AgentRules {
        let version = FileVersion.of(path)
        return state.withLock { state in
            guard version != state.version else { return state.rules }
            state.version = version
            do {
                state.rules = try read()
                let count = state.rules.rules.count
                report(
                    "portal-token agent: the rules file \(path) changed; read it again: "
                        + (version == nil
                            ? "it is gone, so the default alone decides" : "\(count) rule\(count == 1 ? "" : "s")"))
            } catch {
                report(
                    "portal-token agent: the rules file \(path) changed and is refused, so the rules read before "
                        + "stay in force: \(CLIError(error).message)")
            }
            return state.rules
        }
    }
}

/// The agent's last refusals, newest last, at most `capacity` of them; the same caller refused
/// the same thing again replaces its earlier record.
package final class RecentRefusals: Sendable {
    package static let capacity = 32
    private let records: Mutex<[RefusalRecord]> = Mutex([])

    package func add(_ record: RefusalRecord) {
        records.withLock { records in
            records.removeAll {
                $0.caller == record.caller && $0.operation == record.operation && $0.socket == record.socket
            }
            records.append(record)
            if records.count > Self.capacity { records.removeFirst(records.count - Self.capacity) }
        }
    }

    package var all: [RefusalRecord] { records.withLock { $0 } }
}

extension Services {
    /// The audit caller of a socket's peer (the agent's and the proxy's lines, docs/audit.md,
    /// "Fields"): the kernel's identity of it, and the programs that started it.
    package func auditCaller(_ identity: CallerIdentity, socket: String) -> AuditCaller {
        var caller = AuditCaller(identity, socket: socket)
        if identity.pidVerified { caller.parents = describeProcess(identity.pid).parents }
        return caller
    }
}

extension CallerPolicy {
    /// A refusal's suggestion as the agent logs it, one line each: the first marked as the
    /// agent's, the rule's own lines as they go in the file.
    package static func logged(_ suggestion: String) -> [String] {
        let lines = suggestion.split(separator: "\n").map(String.init)
        guard let first = lines.first else { return [] }
        return ["portal-token agent: " + first.dropFirst("hint: ".count)] + lines.dropFirst()
    }
}
