/// The agent's policy (docs/agent.md, "The rules file"): who may do what through its sockets,
/// decided from the caller's kernel identity alone. Pure: the file's text goes in, rules come
/// out; an operation and a caller go in, a decision naming the rule that made it comes out.
///
/// The file is a list of rules, each a `rule NAME` line followed by indented lines: conditions
/// the caller must meet (all of them), what the rule grants (`allow`), what it grants once the
/// user says yes (`ask`), and how long such an answer is kept (`remember IDLE CAP`). Every rule
/// names at least one condition; `any-caller` is the explicit way to say it applies to everyone.
///
/// ```
/// rule build-container
///     container docker:3f2a*
///     allow token env-prod
///     allow git-get github.com *.example.com
///     allow proxy GET /api/v3/clients/me
/// ```
///
/// The first rule whose conditions the caller meets decides; a caller no rule matches falls to
/// the default: on the agent's main socket, a caller with the agent's uid, in its user
/// namespace, outside any container, may do everything it could do itself; anyone else, and
/// anyone on the restricted socket, is refused. The restricted socket never writes, whatever a
/// rule grants.
public struct AgentRules: Sendable, Equatable {
    public var rules: [Rule]

    public init(rules: [Rule] = []) { self.rules = rules }

    /// Which of the agent's sockets a request came in on.
    public enum Socket: String, Sendable, Equatable {
        case main
        /// The socket for forwarding: read-only, and nothing without a rule.
        case restricted
    }

    /// What a request asks to do.
    public enum Operation: Sendable, Equatable, CustomStringConvertible {
        /// The session token of an environment (`/v1/token`, `/v1/exec-credential`): `ENV`, or
        /// `ENV/END_USER` when the end user is known (an environment ID holds no `/`).
        case token(environment: String)
        /// What `status` shows (never the token).
        case status
        /// A git `get` for a host (`host` or `host:port`), and `capability`.
        case gitGet(host: String)
        /// A Docker helper `get` for a registry (the server URL's host).
        case dockerGet(registry: String)
        /// Listing what is stored (Docker's `list`, `list`): names and users, never a secret.
        case list
        /// git or Docker `store` and `erase`.
        case write
        /// A request to the Portal API through the proxy (the agent's, or `portal-token proxy`
        /// on a Unix socket), by its method and path.
        case proxy(method: String, path: String)

        public var description: String {
            switch self {
            case .token(let account):
                guard let slash = account.firstIndex(of: "/") else { return "the token of environment '\(account)'" }
                return
                    "the token of end user '\(account[account.index(after: slash)...])' in environment "
                    + "'\(account[..<slash])'"
            case .status: return "status"
            case .gitGet(let host): return "git get for \(host)"
            case .dockerGet(let registry): return "Docker get for \(registry)"
            case .list: return "list"
            case .write: return "a store, erase or lock"
            case .proxy(let method, let path): return "proxying \(method) \(path.prefix(128))"
            }
        }

        public var isWrite: Bool { self == .write }
    }

    /// One rule: its name, its conditions, its grants.
    public struct Rule: Sendable, Equatable {
        public var name: String
        public var conditions: [Condition] = []
        /// `any-caller`: the rule applies to every caller, and has no other condition. A rule with
        /// no condition and without it matches no one.
        public var anyCaller = false
        public var grants: [Grant] = []
        /// What the rule grants only once the user says yes (`ask` lines, docs/agent.md, "Asking
        /// the user"), in the file's order.
        public var asks: [Grant] = []
        /// How long an answer to one of its questions is kept (`remember IDLE CAP`).
        public var remember = Remember()

        public init(
            name: String, conditions: [Condition] = [], anyCaller: Bool = false, grants: [Grant] = [],
            asks: [Grant] = [], remember: Remember = Remember()
        ) {
            self.name = name
            self.conditions = conditions
            self.anyCaller = anyCaller
            self.grants = grants
            self.asks = asks
            self.remember = remember
        }

        public func matches(_ caller: CallerIdentity, on socket: Socket) -> Bool {
            guard !conditions.isEmpty else { return anyCaller }
            return conditions.allSatisfy { $0.holds(for: caller, on: socket) }
        }

        public func grants(_ operation: Operation) -> Bool {
            grants.contains { $0.covers(operation) }
        }
    }

    /// How long the user's answer to a rule's question stands for the caller it was given for:
    /// until `idleSeconds` pass without a request it covers, and at most `capSeconds` after it
    /// was given. `remember 0s 0s` asks every time, as `ssh-add -c` does.
    public struct Remember: Sendable, Hashable {
        /// 1Password's CLI keeps an authorisation for 10 minutes idle and 12 hours at most.
        public static let defaultIdleSeconds: Int64 = 600
        public static let defaultCapSeconds: Int64 = 43_200
        /// The longest a rule may keep an answer: a week, a session's own cap.
        public static let maximumSeconds: Int64 = 7 * 86_400

        public var idleSeconds: Int64
        public var capSeconds: Int64

        public init(idleSeconds: Int64 = defaultIdleSeconds, capSeconds: Int64 = defaultCapSeconds) {
            self.idleSeconds = idleSeconds
            self.capSeconds = capSeconds
        }
    }

    /// A question a rule puts to the user before it grants: the rule, the `ask` line that covers
    /// the operation (as the file writes it) and how long the answer is kept.
    public struct Ask: Sendable, Hashable {
        public var rule: String
        public var grant: String
        public var remember: Remember

        public init(rule: String, grant: String, remember: Remember) {
            self.rule = rule
            self.grant = grant
            self.remember = remember
        }
    }

    /// What a caller must be for a rule to apply.
    public enum Condition: Sendable, Equatable {
        case uid(UInt32)
        /// `same` or `other` user namespace than the agent's.
        case userNamespace(same: Bool)
        /// `RUNTIME:ID` or `ID` (a glob), or `any` for any container, `none` for none.
        case container(String)
        /// The cgroup path down to the unit or container that holds the caller, as a glob.
        case cgroup(String)
        case flatpak(String)
        /// The systemd unit that holds the caller (never a cgroup named below it), as a glob.
        case unit(String)
        /// The executable's path, as a glob.
        case executable(String)
        case socket(Socket)

        /// The condition as a rules file's line writes it, without the indent.
        public var text: String {
            switch self {
            case .uid(let uid): return "uid \(uid)"
            case .userNamespace(let same): return "user-namespace " + (same ? "same" : "other")
            case .container(let pattern): return "container " + pattern
            case .cgroup(let pattern): return "cgroup " + pattern
            case .flatpak(let pattern): return "flatpak " + pattern
            case .unit(let pattern): return "unit " + pattern
            case .executable(let pattern): return "exe " + pattern
            case .socket(let socket): return "socket " + socket.rawValue
            }
        }

        public func holds(for caller: CallerIdentity, on socket: Socket) -> Bool {
            switch self {
            case .uid(let uid):
                return caller.uid == uid
            case .userNamespace(let same):
                guard let actual = caller.sameUserNamespace, caller.pidVerified else { return false }
                return actual == same
            case .container(let pattern):
                guard caller.pidVerified else { return false }
                let placement = caller.placement
                if pattern == "none" { return !caller.isContained }
                guard let id = placement.containerID else { return false }
                if pattern == "any" { return true }
                if let colon = pattern.firstIndex(of: ":") {
                    return placement.runtime == String(pattern[..<colon])
                        && Glob.matches(String(pattern[pattern.index(after: colon)...]), id)
                }
                return Glob.matches(pattern, id)
            case .cgroup(let pattern):
                guard caller.pidVerified, let cgroup = caller.placement.identityPath else { return false }
                return Glob.matches(pattern, cgroup)
            case .flatpak(let pattern):
                guard caller.pidVerified, let app = caller.flatpakAppID else { return false }
                return Glob.matches(pattern, app)
            case .unit(let pattern):
                guard caller.pidVerified, let unit = caller.placement.systemdUnit else { return false }
                return Glob.matches(pattern, unit)
            case .executable(let pattern):
                guard caller.pidVerified, let executable = caller.executable else { return false }
                return Glob.matches(pattern, executable)
            case .socket(let wanted):
                return socket == wanted
            }
        }
    }

    /// What a rule allows.
    public enum Grant: Sendable, Equatable {
        /// Environment IDs, as globs.
        case token([String])
        case status
        /// Hosts, as globs (`github.com`, `*.example.com`, `localhost:8080`).
        case gitGet([String])
        /// Registries, as globs.
        case dockerGet([String])
        case list
        case write
        /// Methods (empty: `ProxyRules.defaultMethods`) and path prefixes (empty:
        /// `ProxyRules.defaultPathPrefixes`).
        case proxy(methods: [String], prefixes: [String])

        /// The grant as an `allow` or `ask` line writes it, after that word.
        public var text: String {
            func line(_ word: String, _ values: [String]) -> String { ([word] + values).joined(separator: " ") }
            switch self {
            case .token(let patterns): return line("token", patterns)
            case .status: return "status"
            case .gitGet(let patterns): return line("git-get", patterns)
            case .dockerGet(let patterns): return line("docker-get", patterns)
            case .list: return "list"
            case .write: return "write"
            case .proxy(let methods, let prefixes): return line("proxy", methods + prefixes)
            }
        }

        func covers(_ operation: Operation) -> Bool {
            switch (self, operation) {
            case (.token(let patterns), .token(let account)):
                // `ENV` covers every end user of the environment; `ENV/END_USER` only that one,
                // and only when the request's end user is known.
                let environment = String(account.prefix { $0 != "/" })
                return patterns.contains { Glob.matches($0, $0.contains("/") ? account : environment) }
            case (.token, .status), (.status, .status):
                return true
            case (.gitGet(let patterns), .gitGet(let host)):
                return patterns.contains { Glob.matches($0, host) }
            case (.dockerGet(let patterns), .dockerGet(let registry)):
                return patterns.contains { Glob.matches($0, registry) }
            case (.list, .list), (.write, .write):
                return true
            case (.proxy(let methods, let prefixes), .proxy(let method, let path)):
                return Self.proxyAllows(method: method, path: path, methods: methods, prefixes: prefixes)
            default:
                return false
            }
        }

        /// Whether a proxied request is within the methods and path prefixes given (empty: the
        /// proxy's defaults); paths are checked as the proxy checks them, dot segments refused.
        static func proxyAllows(method: String, path: String, methods: [String], prefixes: [String]) -> Bool {
            (methods.isEmpty ? ProxyRules.defaultMethods : methods).contains(method)
                && ProxyRules.isAllowed(
                    path: path[...], prefixes: prefixes.isEmpty ? ProxyRules.defaultPathPrefixes : prefixes)
        }
    }

    /// What decided, for the answer and the log.
    public struct Decision: Sendable, Equatable {
        public var allowed: Bool
        /// `rule NAME`, or `default`.
        public var decidedBy: String
        /// Why, in a few words, when refused.
        public var reason: String
        /// The question to put to the user, when the rule that decided asks rather than allows:
        /// the operation is refused unless the user says yes (docs/agent.md, "Asking the user").
        public var ask: Ask?

        public init(allowed: Bool, decidedBy: String, reason: String, ask: Ask? = nil) {
            self.allowed = allowed
            self.decidedBy = decidedBy
            self.reason = reason
            self.ask = ask
        }
    }

    /// Decides one operation for one caller on one socket, given the agent's own uid and where
    /// the agent itself runs (an agent inside a container serves that container's processes as
    /// its own; another container is still refused by default).
    ///
    /// `defaultProxy` is what the default lets the agent's own user send through the proxy: the
    /// client API (`ProxyRules`' defaults) unless the proxy was started with others.
    public func decide(
        _ operation: Operation, for caller: CallerIdentity, on socket: Socket, agentUID: UInt32,
        agentPlacement: CgroupPlacement = CgroupPlacement(path: nil),
        defaultProxy: Grant = .proxy(methods: [], prefixes: [])
    ) -> Decision {
        if socket == .restricted, operation.isWrite {
            return Decision(
                allowed: false, decidedBy: "restricted socket",
                reason: "the restricted socket never stores, erases or locks")
        }
        if let distrust = caller.distrust {
            return Decision(allowed: false, decidedBy: "identity", reason: distrust)
        }
        if let rule = rules.first(where: { $0.matches(caller, on: socket) }) {
            if rule.grants(operation) {
                return Decision(allowed: true, decidedBy: "rule \(rule.name)", reason: "granted")
            }
            if let index = rule.asks.firstIndex(where: { $0.covers(operation) }) {
                return Decision(
                    allowed: false, decidedBy: "rule \(rule.name)", reason: "rule \(rule.name) asks the user first",
                    ask: Ask(
                        rule: rule.name, grant: "ask " + rule.asks[index].text, remember: rule.remember))
            }
            return Decision(
                allowed: false, decidedBy: "rule \(rule.name)", reason: "rule \(rule.name) does not grant \(operation)")
        }
        guard socket == .main else {
            return Decision(
                allowed: false, decidedBy: "default",
                reason: "the restricted socket serves only what a rule grants, and no rule matches the caller")
        }
        if caller.uid != agentUID {
            return Decision(
                allowed: false, decidedBy: "default", reason: "the caller is another user (uid \(caller.uid))")
        }
        if !caller.pidVerified {
            return Decision(allowed: false, decidedBy: "default", reason: "the caller's process could not be verified")
        }
        if caller.sameUserNamespace != true {
            return Decision(allowed: false, decidedBy: "default", reason: "the caller is in another user namespace")
        }
        let placement = caller.placement
        if caller.hasFlatpakInfo
            || caller.isContained
                && (placement.containerID != agentPlacement.containerID
                    || caller.flatpakAppID != agentPlacement.flatpakAppID)
        {
            return Decision(allowed: false, decidedBy: "default", reason: "the caller runs in a container or sandbox")
        }
        if case .proxy = operation, !defaultProxy.covers(operation) {
            return Decision(
                allowed: false, decidedBy: "default",
                reason: "by default only the proxy's own methods and paths are proxied (the client API unless it "
                    + "was started with others)")
        }
        return Decision(allowed: true, decidedBy: "default", reason: "the agent's own user")
    }

    // MARK: Reading the file

    /// A line of the file that could not be read: its number and what was wrong, never its text.
    public struct ParseError: Error, Sendable, Equatable {
        public var line: Int
        public var message: String

        public init(line: Int, _ message: String) {
            self.line = line
            self.message = message
        }
    }

    /// Reads the rules file, as bytes: a line ends at LF, one CR before it dropped (so a file
    /// with CR LF endings reads as its LF form); any other control character, and bytes that are
    /// not UTF-8, are an error naming the line. `#` starts a comment; blank lines are ignored.
    /// A rule with no condition is an error: `any-caller` says so explicitly.
    public static func parse(_ text: some Collection<UInt8>) throws(ParseError) -> AgentRules {
        let bytes = Array(text)
        var rules: [Rule] = []
        var names: Set<String> = []
        /// The rules that have their `remember` line.
        var remembers: Set<Int> = []
        /// The line of the current rule's `rule NAME`.
        var ruleLine = 0
        func requireCondition() throws(ParseError) {
            guard let rule = rules.last, rule.conditions.isEmpty, !rule.anyCaller else { return }
            throw ParseError(
                line: ruleLine,
                "the rule '\(rule.name)' names no condition: add the conditions a caller must meet, or "
                    + "'any-caller' for a rule that applies to every caller")
        }
        for (index, rawLine) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = try Self.text(of: rawLine.last == 0x0D ? rawLine.dropLast() : rawLine, line: number)
            let words = line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard let keyword = words.first else { continue }
            if line.first != " " && line.first != "\t" {
                guard keyword == "rule", words.count == 2 else {
                    throw ParseError(line: number, "expected 'rule NAME' at the start of a line")
                }
                guard words[1].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." })
                else { throw ParseError(line: number, "a rule name takes letters, digits, '-', '_' and '.'") }
                guard names.insert(words[1]).inserted else {
                    throw ParseError(line: number, "the rule name '\(words[1])' is used twice")
                }
                try requireCondition()
                rules.append(Rule(name: words[1]))
                ruleLine = number
                continue
            }
            guard !rules.isEmpty else {
                throw ParseError(line: number, "an indented line comes before any 'rule NAME'")
            }
            let values = Array(words.dropFirst())
            if keyword != "allow" && keyword != "ask" && keyword != "remember" {
                if keyword == "any-caller" {
                    guard values.isEmpty else { throw ParseError(line: number, "'any-caller' takes no value") }
                    guard rules[rules.count - 1].conditions.isEmpty else {
                        throw ParseError(line: number, "'any-caller' stands alone: its rule has no other condition")
                    }
                    rules[rules.count - 1].anyCaller = true
                    continue
                }
                guard !rules[rules.count - 1].anyCaller else {
                    throw ParseError(line: number, "'any-caller' stands alone: its rule has no other condition")
                }
            }
            if let condition = try Self.condition(keyword, values, line: number) {
                rules[rules.count - 1].conditions.append(condition)
                continue
            }
            switch keyword {
            case "remember":
                guard !remembers.contains(rules.count - 1) else {
                    throw ParseError(line: number, "a rule takes one 'remember' line")
                }
                guard values.count == 2, let idle = AuditDuration.seconds(values[0]),
                    let cap = AuditDuration.seconds(values[1])
                else {
                    throw ParseError(
                        line: number, "'remember' takes an idle time and a cap, such as 'remember 10m 12h'")
                }
                guard cap <= Remember.maximumSeconds else {
                    throw ParseError(line: number, "'remember': the cap is at most 7d")
                }
                guard idle <= cap else {
                    throw ParseError(line: number, "'remember': the idle time is longer than the cap")
                }
                remembers.insert(rules.count - 1)
                rules[rules.count - 1].remember = Remember(idleSeconds: idle, capSeconds: cap)
            case "allow", "ask":
                guard let what = values.first else {
                    throw ParseError(line: number, "'\(keyword)' needs what it \(keyword)s for")
                }
                let patterns = Array(values.dropFirst())
                let grant: Grant
                switch what {
                case "token":
                    guard !patterns.isEmpty else {
                        throw ParseError(line: number, "'\(keyword) token' needs environment IDs (or *)")
                    }
                    grant = .token(patterns)
                case "git-get":
                    guard !patterns.isEmpty else {
                        throw ParseError(line: number, "'\(keyword) git-get' needs hosts (or *)")
                    }
                    grant = .gitGet(patterns)
                case "docker-get":
                    guard !patterns.isEmpty else {
                        throw ParseError(line: number, "'\(keyword) docker-get' needs registries (or *)")
                    }
                    grant = .dockerGet(patterns)
                case "proxy":
                    var methods: [String] = []
                    var prefixes: [String] = []
                    for value in patterns {
                        if value.hasPrefix("/") {
                            guard ProxyRules.isAllowed(path: value[...], prefixes: [value]) else {
                                throw ParseError(
                                    line: number,
                                    "'\(keyword) proxy' takes path prefixes without dot segments or encoded slashes")
                            }
                            prefixes.append(value)
                        } else {
                            guard ProxyRules.defaultMethods.contains(value) else {
                                throw ParseError(
                                    line: number,
                                    "'\(keyword) proxy' takes methods ("
                                        + ProxyRules.defaultMethods.joined(separator: ", ")
                                        + ") and path prefixes starting with /")
                            }
                            methods.append(value)
                        }
                    }
                    grant = .proxy(methods: methods, prefixes: prefixes)
                case "status", "list", "write":
                    guard patterns.isEmpty else {
                        throw ParseError(line: number, "'\(keyword) \(what)' takes no value")
                    }
                    grant = what == "status" ? .status : what == "list" ? .list : .write
                default:
                    throw ParseError(
                        line: number, "'\(keyword)' takes token, git-get, docker-get, proxy, status, list or write")
                }
                if keyword == "allow" {
                    rules[rules.count - 1].grants.append(grant)
                } else {
                    rules[rules.count - 1].asks.append(grant)
                }
            default:
                throw ParseError(
                    line: number,
                    "unknown word: a rule holds uid, user-namespace, container, cgroup, flatpak, unit, exe, socket, "
                        + "any-caller, allow, ask and remember lines")
            }
        }
        try requireCondition()
        return AgentRules(rules: rules)
    }

    /// A condition line's keyword and values as a condition; nil for a keyword that names none.
    /// A delegated credential's `caller` caveats are read by it too.
    public static func condition(_ keyword: String, _ values: [String], line number: Int) throws(ParseError)
        -> Condition?
    {
        func one() throws(ParseError) -> String {
            guard values.count == 1 else { throw ParseError(line: number, "'\(keyword)' takes one value") }
            return values[0]
        }
        switch keyword {
        case "uid":
            guard let uid = UInt32(try one()) else { throw ParseError(line: number, "uid takes a number") }
            return .uid(uid)
        case "user-namespace":
            let value = try one()
            guard value == "same" || value == "other" else {
                throw ParseError(line: number, "user-namespace takes 'same' or 'other'")
            }
            return .userNamespace(same: value == "same")
        case "container": return .container(try one())
        case "cgroup": return .cgroup(try one())
        case "flatpak": return .flatpak(try one())
        case "unit": return .unit(try one())
        case "exe":
            let value = try one()
            guard value.hasPrefix("/") else { throw ParseError(line: number, "exe takes an absolute path") }
            return .executable(value)
        case "socket":
            guard let socket = Socket(rawValue: try one()) else {
                throw ParseError(line: number, "socket takes 'main' or 'restricted'")
            }
            return .socket(socket)
        default: return nil
        }
    }

    /// One line's bytes as text: UTF-8 with no control character but the tab.
    private static func text(of bytes: ArraySlice<UInt8>, line: Int) throws(ParseError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ParseError(line: line, "the line is not UTF-8 text")
        }
        for scalar in text.unicodeScalars where scalar != "\t" {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator:
                let digits = String(scalar.value, radix: 16, uppercase: true)
                let code = String(repeating: "0", count: max(0, 4 - digits.count)) + digits
                throw ParseError(
                    line: line,
                    "the line holds a control or format character (U+\(code)): lines end at LF, and only a CR "
                        + "right before it is dropped")
            default:
                continue
            }
        }
        return text
    }
}

/// Shell-style globs: `*` matches any run of characters (`/` included), `?` one character;
/// everything else matches itself.
public enum Glob {
    public static func matches(_ pattern: String, _ text: String) -> Bool {
        let pattern = Array(pattern.utf8), text = Array(text.utf8)
        var p = 0, t = 0
        var star = -1, mark = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                mark = t
                p += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}
