import Basics
import Operations
import PortalTokenCore

struct DelegateCommand: Command {
    static let name = "delegate"
    static let summary = "Mint a credential for the proxy narrower than the session, or narrow one offline"
    static let details = """
        Prints on stdout a delegated credential (ptd1.…): a bearer for the proxy's
        Portal-Token-Proxy header that exec --proxy, proxy and the agent's proxy accept
        in place of their own credential, and forward with the session's token, which
        its holder never sees. It allows at most what its caveats say: --ttl DURATION
        (90s, 30m, 12h, 7d; required, at most 7d), the methods of --allow (repeatable),
        the paths of --path (repeatable: a path alone, or PATH/* for every path below
        it; never one with dot segments or encoded slashes), the caller
        conditions of --caller (repeatable, in the rules file's words: 'container
        docker:3f2a*', 'unit ci-*.service', 'uid 1000', 'socket restricted'; met only on
        a Unix socket, where the kernel names the caller) and --uses N requests. It is
        good for the signed-in environment only, and dies with the session: a new
        sign-in ends every credential minted before it. The proxy in front still
        applies its own methods, paths and rules: a credential never widens them.

        --from FILE (- for stdin) derives a narrower credential from one you hold,
        offline, without the session or the agent: the new caveats are added to the
        old ones, which stay in force, so nothing derived can allow more than its
        parent. --ttl is then optional and can only shorten the life.

        On stderr: the new credential's id (not secret; delegations lists and revokes by
        it) and its expiry. Exit 1 when not signed in, 2 for a wrong option or an
        unreadable --from, 4 when the registry cannot be written. In client mode
        (PORTAL_TOKEN_AGENT_SOCK) minting is refused naming the agent (exit 4); --from
        works anywhere.
        """

    let request: Delegate.Request
    let parentFile: String?

    init(arguments: ParsedArguments) throws(CLIError) {
        var request = Delegate.Request()
        if let text = arguments.value(.ttl) {
            guard let seconds = AuditDuration.seconds(text), seconds > 0, seconds <= Delegate.maximumLifetime else {
                throw .usage("--ttl takes a duration such as 90s, 30m, 12h or 7d, at most 7d")
            }
            request.lifetime = seconds
        }
        for method in arguments.values(.delegateMethod) {
            guard ProxyRules.defaultMethods.contains(method.uppercased()) else {
                throw .usage("--allow takes " + ProxyRules.defaultMethods.joined(separator: ", "))
            }
            request.methods.append(method.uppercased())
        }
        for path in arguments.values(.delegatePath) {
            guard DelegatedCredential.isPathPattern(path) else {
                throw .usage(
                    "--path takes a path such as /api/v3/clients/me, or /api/v3/clients/me/* for what is below it, "
                        + "without dot segments or encoded slashes")
            }
            request.paths.append(path)
        }
        for text in arguments.values(.delegateCaller) {
            let words = text.split(separator: " ").map(String.init)
            guard let keyword = words.first,
                let condition = try? AgentRules.condition(keyword, Array(words.dropFirst()), line: 0)
            else {
                throw .usage(
                    "--caller takes a rules file condition such as 'container docker:3f2a*' or 'unit ci-*.service'")
            }
            request.callers.append(condition)
        }
        if let uses = arguments.value(.uses) {
            guard let count = Int(uses), count > 0 else { throw .usage("--uses takes a whole number above 0") }
            request.uses = count
        }
        parentFile = arguments.value(.from)
        guard request.lifetime != nil || parentFile != nil else {
            throw .usage("delegate needs --ttl DURATION (at most 7d), or --from FILE to narrow a credential")
        }
        self.request = request
    }

    func run(in context: Context) throws {
        var request = request
        if let parentFile {
            var bytes: [UInt8]
            if parentFile == "-" {
                bytes = context.streams.readAll(limit: DelegatedCredential.maximumTextLength)
            } else {
                do {
                    bytes = try FileReading.contents(
                        of: parentFile, limit: DelegatedCredential.maximumTextLength, regularOnly: false)
                } catch {
                    throw CLIError.usage("cannot read \(parentFile): \(error.reason)")
                }
            }
            defer { zeroize(&bytes) }
            while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
            guard let parent = DelegatedCredential(text: bytes) else {
                throw CLIError.usage("--from holds no delegated credential portal-token can read")
            }
            request.parent = parent
        } else if try context.agent() != nil {
            throw CLIError(
                "delegate mints under the session, which the agent holds: run it where the agent runs",
                hint: "or narrow a credential you hold with --from", exitCode: .storage)
        }
        let credential = try Delegate.run(request, context)
        var text = Array(credential.text.text.utf8) + [0x0A]
        context.streams.write(text, to: context.streams.output)
        zeroize(&text)
        let expiry = credential.expires.map(RFC3339.format) ?? "never"
        context.streams.printError("portal-token: delegated credential \(credential.id), expires \(expiry)")
    }
}

struct DelegationsCommand: Command {
    static let name = "delegations"
    static let summary = "List the delegated credentials that are live, or revoke one by its id"
    static let details = """
        Lists what the registry ($XDG_STATE_HOME/portal-token/delegations.json) knows of
        the delegated credentials not yet expired: those delegate and exec --proxy
        minted, and those derived from them that a proxy has served. Each line shows
        the id, its parent, where it came from, its expiry, the requests it made,
        whether it is revoked and its own caveats. Never a credential.

        --revoke ID revokes it and every credential derived from it: every proxy refuses
        them from its next request (403, nothing sent upstream). An id not listed yet
        (derived, never used) is revoked too, and the command says so.

        With --format json: {"delegations":[{"id","parent","origin","environment",
        "issued","expires","used","revoked","scope"}]}, times in RFC 3339. Exit 0; 4 when
        the registry cannot be read or written.
        """

    let revoke: [String]
    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        revoke = arguments.values(.revoke)
        for id in revoke where !DelegatedCredential.isID(id) {
            throw .usage("--revoke takes a credential's id: 16 hex digits, as delegate and delegations print it")
        }
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        if !revoke.isEmpty {
            for id in revoke {
                let listed = try Delegations.revoke(id, context)
                context.streams.printError(
                    "portal-token: revoked \(id)"
                        + (listed ? "" : " (no proxy had seen it yet; it is refused if one does)"))
            }
            return
        }
        let entries = try Delegations.list(context)
        if json {
            let items: [JSONValue] = entries.map { entry in
                var members: [String: JSONValue] = [
                    "id": .string(entry.id), "origin": .string(entry.origin), "scope": .string(entry.scope),
                    "issued": .string(RFC3339.format(entry.issued)), "expires": .string(RFC3339.format(entry.expires)),
                    "used": .int(Int64(entry.used)), "revoked": .bool(entry.revoked),
                ]
                if let parent = entry.parent { members["parent"] = .string(parent) }
                if let environment = entry.environment { members["environment"] = .string(environment) }
                return .object(members)
            }
            context.streams.print(JSONValue.object(["delegations": .array(items)]).serialized)
            return
        }
        guard !entries.isEmpty else {
            context.streams.print("no delegated credential is live")
            return
        }
        for entry in entries {
            let state = entry.revoked ? "revoked" : "live"
            context.streams.print(
                "\(entry.id)  parent \(entry.parent ?? "-")  \(entry.origin)  "
                    + "expires \(RFC3339.format(entry.expires))  used \(entry.used)  \(state)"
                    + (entry.scope.isEmpty ? "" : "  " + TerminalText.escaped(entry.scope)))
        }
    }
}
