/// The rule that would admit a refused caller (docs/agent.md, "Letting a sandbox in"): written
/// in the rules file's own syntax, naming the caller only by what the kernel told the agent
/// (socket, uid, user namespace, the container, Flatpak app, unit or cgroup systemd or an engine
/// made, the executable), never by anything the caller says or writes itself (its
/// `/.flatpak-info`, a cgroup it made below its own), and granting the one operation refused.
extension AgentRules {
    /// A rule to add, and where: a rule that already matches the caller decides for it first, so
    /// the new one must go above it.
    public struct Suggestion: Sendable, Equatable {
        public var name: String
        /// The rule's lines, `rule NAME` first, each ending in LF.
        public var text: String
        /// The rule that matches the caller today, when one does: the new rule goes above it.
        public var above: String?

        /// Where to put it, in a few words.
        public var placement: String {
            guard let above else { return "append it to the rules file" }
            return "put it above rule \(above), which matches this caller first (and copy into it what \(above) "
                + "grants that this caller still needs)"
        }
    }

    /// The narrowest rule that admits `caller` to `operation` on `socket`, or why none can.
    public func suggestion(
        for operation: Operation, caller: CallerIdentity, on socket: Socket, agentUID: UInt32,
        agentPlacement: CgroupPlacement = CgroupPlacement(path: nil)
    ) -> Result<Suggestion, SuggestionUnavailable> {
        if socket == .restricted, operation.isWrite {
            return .failure(
                SuggestionUnavailable(
                    "the restricted socket never stores, erases or locks, whatever a rule grants: do it through "
                        + "the main socket or on the agent's host"))
        }
        if let distrust = caller.distrust {
            return .failure(SuggestionUnavailable("no rule can admit this caller: \(distrust)"))
        }
        guard caller.pidVerified else {
            return .failure(
                SuggestionUnavailable(
                    "the caller's process could not be verified, so a rule could name it by uid alone; connect "
                        + "from the process that asks"))
        }
        guard let grant = Self.grantLine(for: operation) else {
            return .failure(
                SuggestionUnavailable(
                    "what was asked cannot be written as a grant of its own (an empty environment ID, a method "
                        + "or path the rules take no grant for, or characters a rule cannot hold)"))
        }

        var conditions = ["socket \(socket.rawValue)", "uid \(caller.uid)"]
        if let same = caller.sameUserNamespace { conditions.append("user-namespace \(same ? "same" : "other")") }
        let placement = caller.placement
        let nameStem: String
        if let id = placement.containerID, let runtime = placement.runtime {
            guard Self.isWritable(id) else { return .failure(Self.unwritable("container ID")) }
            conditions.append("container \(runtime):\(id)")
            nameStem = "\(runtime)-\(id.prefix(12))"
        } else if let app = placement.flatpakAppID {
            guard Self.isWritable(app) else { return .failure(Self.unwritable("Flatpak app ID")) }
            conditions.append("flatpak \(app)")
            nameStem = "flatpak-\(app)"
        } else {
            // A root of its own with a /.flatpak-info counts as contained, so `container none`
            // would not hold; the file itself names nothing.
            if !caller.hasFlatpakInfo { conditions.append("container none") }
            if let unit = placement.systemdUnit {
                guard Self.isWritable(unit) else { return .failure(Self.unwritable("systemd unit")) }
                conditions.append("unit \(unit)")
                nameStem = unit
            } else if let path = placement.identityPath {
                guard Self.isWritable(path) else { return .failure(Self.unwritable("cgroup")) }
                conditions.append("cgroup \(path)")
                nameStem = "uid\(caller.uid)"
            } else {
                nameStem = "uid\(caller.uid)"
            }
        }
        // The executable narrows the rule further when its path can be written (not `(deleted)`).
        if let executable = caller.executable, executable.hasPrefix("/"), Self.isWritable(executable) {
            conditions.append("exe \(executable)")
        }

        let name = uniqueName("admit-" + Self.nameCharacters(nameStem))
        let text = "rule \(name)\n" + (conditions + [grant]).map { "    \($0)\n" }.joined()
        let matching = rules.first { $0.matches(caller, on: socket) }?.name
        // What it says must be what it does: the rule, put where it says, admits the caller.
        guard let parsed = try? AgentRules.parse(Array(text.utf8)), parsed.rules.count == 1 else {
            return .failure(SuggestionUnavailable("the rule for this caller could not be written"))
        }
        var changed = self
        let index = matching.flatMap { name in rules.firstIndex { $0.name == name } } ?? rules.count
        changed.rules.insert(parsed.rules[0], at: index)
        let decision = changed.decide(
            operation, for: caller, on: socket, agentUID: agentUID, agentPlacement: agentPlacement)
        guard decision.allowed, decision.decidedBy == "rule \(name)" else {
            return .failure(SuggestionUnavailable("no rule written from what the agent sees admits this caller"))
        }
        return .success(Suggestion(name: name, text: text, above: matching))
    }

    /// Why no rule is suggested.
    public struct SuggestionUnavailable: Error, Sendable, Equatable {
        public var reason: String
        public init(_ reason: String) { self.reason = reason }
    }

    private static func unwritable(_ what: String) -> SuggestionUnavailable {
        SuggestionUnavailable("the caller's \(what) holds characters a rule cannot write exactly")
    }

    /// The one grant that covers `operation` and as little else as the syntax allows.
    static func grantLine(for operation: Operation) -> String? {
        switch operation {
        case .token(let environment):
            return isWritable(environment) ? "allow token \(environment)" : nil
        case .status:
            return "allow status"
        case .gitGet(let host):
            // `capability` names no host, and is judged as a status.
            if host.isEmpty { return "allow status" }
            return isWritable(host) ? "allow git-get \(host)" : nil
        case .dockerGet(let registry):
            return isWritable(registry) ? "allow docker-get \(registry)" : nil
        case .list:
            return "allow list"
        case .write:
            return "allow write"
        case .proxy(let method, let path):
            guard ProxyRules.defaultMethods.contains(method), path.hasPrefix("/"), isWritable(path),
                ProxyRules.isAllowed(path: path[...], prefixes: [path])
            else { return nil }
            return "allow proxy \(method) \(path)"
        }
    }

    /// A value a rule holds as itself: printable ASCII, no space, no comment sign, and no glob
    /// character (which would widen the rule past the value).
    static func isWritable(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 512
            && value.utf8.allSatisfy { byte in
                (0x21...0x7E).contains(byte) && byte != UInt8(ascii: "#") && byte != UInt8(ascii: "*")
                    && byte != UInt8(ascii: "?")
            }
    }

    private static func nameCharacters(_ stem: String) -> String {
        var name = String(
            stem.prefix(48).map { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) ? $0 : "-" })
        while name.hasSuffix(".scope") || name.hasSuffix(".service") {
            name = String(name.prefix { $0 != "." })
        }
        return name.isEmpty ? "caller" : name
    }

    private func uniqueName(_ base: String) -> String {
        let taken = Set(rules.map(\.name))
        guard taken.contains(base) else { return base }
        var number = 2
        while taken.contains("\(base)-\(number)") { number += 1 }
        return "\(base)-\(number)"
    }
}

// MARK: A refusal, kept for `agent --check-rules`

/// A refusal the agent keeps in memory, for `portal-token agent --check-rules` to ask for
/// (`GET /v1/refusals`): who was refused, what it asked, on which socket, and what decided.
/// None of it is secret.
public struct RefusalRecord: Sendable, Equatable {
    public var time: Int64
    public var caller: CallerIdentity
    public var operation: AgentRules.Operation
    public var socket: AgentRules.Socket
    public var decidedBy: String

    public init(
        time: Int64, caller: CallerIdentity, operation: AgentRules.Operation, socket: AgentRules.Socket,
        decidedBy: String
    ) {
        self.time = time
        self.caller = caller
        self.operation = operation
        self.socket = socket
        self.decidedBy = decidedBy
    }

    public var json: JSONValue {
        var callerFields: [String: JSONValue] = [
            "uid": .number(String(caller.uid)), "gid": .number(String(caller.gid)),
            "pid": .number(String(caller.pid)), "pidVerified": .bool(caller.pidVerified),
            "hasFlatpakInfo": .bool(caller.hasFlatpakInfo),
        ]
        if let same = caller.sameUserNamespace { callerFields["sameUserNamespace"] = .bool(same) }
        if let namespace = caller.userNamespace { callerFields["userNamespace"] = .number(String(namespace)) }
        if let cgroup = caller.cgroup { callerFields["cgroup"] = .string(cgroup) }
        if let executable = caller.executable { callerFields["executable"] = .string(executable) }
        switch caller.processChange {
        case .ended?: callerFields["processChange"] = .string("ended")
        case .executed?: callerFields["processChange"] = .string("executed")
        case nil: break
        }
        var operationFields: [String: JSONValue]
        switch operation {
        case .token(let environment): operationFields = ["kind": .string("token"), "value": .string(environment)]
        case .status: operationFields = ["kind": .string("status")]
        case .gitGet(let host): operationFields = ["kind": .string("git-get"), "value": .string(host)]
        case .dockerGet(let registry): operationFields = ["kind": .string("docker-get"), "value": .string(registry)]
        case .list: operationFields = ["kind": .string("list")]
        case .write: operationFields = ["kind": .string("write")]
        case .proxy(let method, let path):
            operationFields = ["kind": .string("proxy"), "method": .string(method), "value": .string(path)]
        }
        return .object([
            "time": .number(String(time)), "caller": .object(callerFields), "operation": .object(operationFields),
            "socket": .string(socket.rawValue), "decidedBy": .string(decidedBy),
        ])
    }

    public init?(json: JSONValue) {
        guard let fields = json["caller"], let uid = fields["uid"]?.int64Value.flatMap(UInt32.init(exactly:)),
            let gid = fields["gid"]?.int64Value.flatMap(UInt32.init(exactly:)),
            let pid = fields["pid"]?.int64Value.flatMap(Int32.init(exactly:)),
            let operationFields = json["operation"], let kind = operationFields["kind"]?.stringValue,
            let socket = json["socket"]?.stringValue.flatMap(AgentRules.Socket.init(rawValue:))
        else { return nil }
        var caller = CallerIdentity(
            uid: uid, gid: gid, pid: pid, pidVerified: fields["pidVerified"]?.boolValue ?? false,
            sameUserNamespace: fields["sameUserNamespace"]?.boolValue, cgroup: fields["cgroup"]?.stringValue,
            executable: fields["executable"]?.stringValue,
            hasFlatpakInfo: fields["hasFlatpakInfo"]?.boolValue ?? false)
        caller.userNamespace = fields["userNamespace"]?.int64Value.flatMap(UInt64.init(exactly:))
        switch fields["processChange"]?.stringValue {
        case "ended": caller.processChange = .ended
        case "executed": caller.processChange = .executed
        default: break
        }
        let value = operationFields["value"]?.stringValue ?? ""
        let operation: AgentRules.Operation
        switch kind {
        case "token": operation = .token(environment: value)
        case "status": operation = .status
        case "git-get": operation = .gitGet(host: value)
        case "docker-get": operation = .dockerGet(registry: value)
        case "list": operation = .list
        case "write": operation = .write
        case "proxy": operation = .proxy(method: operationFields["method"]?.stringValue ?? "", path: value)
        default: return nil
        }
        self.init(
            time: json["time"]?.int64Value ?? 0, caller: caller, operation: operation, socket: socket,
            decidedBy: json["decidedBy"]?.stringValue ?? "")
    }
}
