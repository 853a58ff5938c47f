import Basics
import Glibc
import Operations
import PortalTokenCore

struct ProxyCommand: Command {
    static let name = "proxy"
    static let summary = "Serve the Portal API on a local port or socket, adding the session token"
    static let details = """
        A reverse proxy to the configured API host, never an open one: a request to it
        goes to the same path on the API host, with Authorization: Bearer and the
        session token added when the request carries no Authorization of its own (one it
        carries passes untouched). The token never leaves portal-token. Only the methods
        and path prefixes allowed (default: GET, HEAD, POST, PUT, PATCH and DELETE under
        /api/v3/clients/me) are forwarded, another method getting 405 and another path
        403; a request in absolute form is refused, redirects are passed back, never
        followed, and http_proxy and the like are ignored. Bodies stream in both
        directions.

        A 401 from Portal ends the session (the on-session-invalidated hook runs once)
        and is passed back; every accepted request slides the expiry, as api does. In
        client mode (PORTAL_TOKEN_AGENT_SOCK) requests go on to the agent's own proxy,
        which adds the token; the agent's sockets serve the same proxy.

        With --listen (the default), localhost:PORT or PORT alone names the same
        loopback port; it prints PORTAL_API_HOST, PORTAL_TOKEN_PROXY_URL,
        PORTAL_TOKEN_PROXY_HEADER and PORTAL_TOKEN_PROXY_CREDENTIAL lines on stdout.
        Every request must then carry Host 127.0.0.1:PORT (or localhost:PORT), else 403,
        and the header Portal-Token-Proxy with the credential: without it the answer is
        412, with another value 403. It runs until killed.

        With --socket, PATH is absolute; the socket is 0600, in a directory only you can
        write, and serves the processes the rules file allows
        ($XDG_CONFIG_HOME/portal-token/agent.rules, the agent's: allow proxy). Without a
        rule, your own user in your own user namespace, outside containers, may send
        what this proxy forwards; refused callers get 403. SIGTERM, SIGINT or SIGHUP
        stop it after the requests in progress, and the socket is removed.

        With --allow-path (repeatable), a path passes when it equals PREFIX or goes on
        below it after a slash; paths with dot segments, empty segments, a semicolon or
        encoded dots or slashes are refused whatever the prefixes. With --allow-method
        (repeatable), METHOD is taken in any case, never CONNECT.

        """ + sessionSettings

    let address: LocalListenAddress
    let methods: [String]
    let pathPrefixes: [String]

    init(arguments: ParsedArguments) throws(CLIError) {
        if let path = arguments.value(.proxySocket) {
            guard path.hasPrefix("/") else { throw .usage("--socket takes an absolute path") }
            address = .unixSocket(path: path)
        } else {
            address = .loopback(port: try Self.port(arguments.value(.listen) ?? "127.0.0.1:0"))
        }
        var methods: [String] = []
        for method in arguments.values(.allowMethod) {
            let upper = method.uppercased()
            guard !upper.isEmpty, upper.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }),
                upper != "CONNECT"
            else {
                throw .usage("--allow-method takes an HTTP method such as GET (never CONNECT)")
            }
            methods.append(upper)
        }
        self.methods = methods.isEmpty ? ProxyRules.defaultMethods : methods
        var prefixes: [String] = []
        for prefix in arguments.values(.allowPath) {
            guard prefix.hasPrefix("/"), ProxyRules.isAllowed(path: prefix[...], prefixes: [prefix]) else {
                throw .usage(
                    "--allow-path takes a path such as /api/v3/clients/me, without dot segments or encoded slashes")
            }
            prefixes.append(prefix)
        }
        pathPrefixes = prefixes.isEmpty ? ProxyRules.defaultPathPrefixes : prefixes
    }

    /// `127.0.0.1:PORT`, `localhost:PORT` or `PORT`.
    static func port(_ text: String) throws(CLIError) -> UInt16 {
        var portText = Substring(text)
        for prefix in ["127.0.0.1:", "localhost:"] where text.lowercased().hasPrefix(prefix) {
            portText = text.dropFirst(prefix.count)
        }
        guard !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let port = UInt16(portText)
        else {
            throw .usage(
                "--listen takes 127.0.0.1:PORT (or PORT): the proxy listens on loopback only",
                hint: "for example --listen 127.0.0.1:8787, or 127.0.0.1:0 for any free port")
        }
        return port
    }

    func run(in context: Context) throws {
        // In client mode it sends to the agent's proxy, which holds the session.
        let upstream =
            try context.agent().map(PortalProxy.Upstream.agent) ?? .portal(PortalProxy.ProxySessions(context))
        // Callers on a Unix socket are judged by the agent's rules file, on the kernel's word.
        var policy: CallerPolicy?
        if case .unixSocket = address {
            let streams = context.streams
            policy = try CallerPolicy.load(context, rulesPath: nil) { streams.printError($0) }
            // The own user may send what this proxy was started to forward.
            policy?.defaultProxy = .proxy(methods: methods, prefixes: pathPrefixes)
        }
        let server = try context.services.bindLocalServer(address)
        var credential: Secret?
        let listener: ProxyListenerKind
        if let port = server.port {
            listener = .loopback(port: port)
            credential = ProxyRules.makeCredential()
        } else {
            listener = .unixSocket
        }
        let proxy = try PortalProxy(
            rules: ProxyRules(
                listener: listener, credential: credential, methods: methods, pathPrefixes: pathPrefixes,
                userAgent: PortalProxy.userAgent),
            policy: policy, address: address, context: context, upstream: upstream)
        if let port = server.port, let credential {
            var lines = Array(
                """
                PORTAL_API_HOST=127.0.0.1:\(port)
                \(ProxyEnvironment.url)=http://127.0.0.1:\(port)
                \(ProxyEnvironment.header)=\(ProxyRules.markerHeader)
                \(ProxyEnvironment.credential)=\(credential.text)

                """.utf8)
            context.streams.write(lines, to: context.streams.output)
            zeroize(&lines)
        } else if case .unixSocket(let path) = address {
            context.streams.printError("portal-token: proxy listening on \(path)")
        }
        try server.run { request, exchange, caller in proxy.handle(request, exchange, caller) }
    }
}

extension ExecCommand {
    /// `exec --proxy`: the command runs as a child, with a proxy on 127.0.0.1 for it alone (a
    /// random port and credential) that lives as long as it does; its environment names the
    /// proxy and never holds the token (docs/proxy.md, "exec --proxy").
    func runWithProxy(in context: Context) throws -> Never {
        // In client mode the proxy sends to the agent's, which holds the session.
        let upstream: PortalProxy.Upstream
        let environmentID: String?
        if let agent = try context.agent() {
            upstream = .agent(agent)
            environmentID = try agent.sessionStatus(context).authEnvironmentID
        } else {
            let sessions = try PortalProxy.ProxySessions(context)
            _ = try sessions.service.usableSession()
            upstream = .portal(sessions)
            environmentID = sessions.service.authEnvironmentID
        }
        // Signals this process forwards or ignores are taken by sigwait below, so they are blocked
        // before any thread starts; the command gets them back at their defaults.
        var handled = sigset_t()
        sigemptyset(&handled)
        for signal in [SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGCHLD] { sigaddset(&handled, signal) }
        pthread_sigmask(SIG_BLOCK, &handled, nil)

        let server = try context.services.bindLocalServer(.loopback(port: 0))
        guard let port = server.port else { throw CLIError("the proxy has no port", exitCode: .usage) }
        // The child's credential: delegated, under a key this process alone holds, so it lives no
        // longer than the proxy does, and its expiry and scope are its own (docs/delegation.md).
        let key = Secret(bytes: Sodium.randomBytes(32))
        let now = context.now()
        var caveats: [DelegatedCredential.Caveat] = [
            .expires(now + proxyLifetime), .methods(ProxyRules.defaultMethods),
            .paths(ProxyRules.defaultPathPrefixes.flatMap { [$0, $0 + "/*"] }),
        ]
        if let environmentID { caveats.append(.environment(environmentID)) }
        let delegated = DelegatedCredential.mint(key: key, id: DelegatedCredential.makeID(), caveats: caveats)
        let proxy = try PortalProxy(
            rules: ProxyRules(listener: .loopback(port: port), credential: nil, userAgent: PortalProxy.userAgent),
            policy: nil, address: .loopback(port: port), context: context, upstream: upstream, localKey: key,
            environmentID: environmentID)
        // Listed, so that delegations shows and revokes it; a registry that cannot be written
        // (a read-only home in a sandbox) leaves it unlisted, and it lives as the proxy does.
        do {
            try DelegationRegistry(context: context).update(now: now) { entries in
                entries[delegated.id] = DelegationRegistry.entry(
                    for: delegated.links[0], origin: "exec --proxy", environment: environmentID, now: now)
            }
        } catch {
            context.trace("exec --proxy: the credential is not listed: \(CLIError(error).message)")
        }
        let credential = delegated.text
        try server.start { request, exchange, caller in proxy.handle(request, exchange, caller) }

        var environment = ProcessEnvironment.current()
        environment.removeValue(forKey: Self.defaultTokenVariable)
        environment.removeValue(forKey: "PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT")
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(port)"
        environment[ProxyEnvironment.url] = "http://127.0.0.1:\(port)"
        environment[ProxyEnvironment.header] = ProxyRules.markerHeader
        environment[ProxyEnvironment.credential] = credential.text
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = environmentID

        // The run's own line, as plain exec writes it (its exit code is COMMAND's); each request
        // COMMAND sends through the proxy writes its own.
        context.audit?.program = String(command[0].split(separator: "/").last ?? "")
        context.recordAudit(error: nil, exitCode: nil)
        closeOwnDescriptorsOnExec()
        let child = try spawn(environment: environment)
        let code = waitForChild(child, signals: handled)
        server.stop()
        exit(code)
    }

    /// The command in this process's group, where the terminal's SIGINT and SIGQUIT reach it.
    private func spawn(environment: [String: String]) throws -> pid_t {
        switch ChildProcess.spawn(
            command[0], Array(command.dropFirst()), searchPath: true, environment: environment, ownProcessGroup: false)
        {
        case .success(let child): return child
        case .failure(let failure):
            let name = String(command[0].prefix(256))
            if failure.number == ENOENT || failure.number == ENOTDIR {
                throw CLIError(
                    "cannot run '\(name)': command not found", hint: "check the name and PATH",
                    exitCode: .commandNotFound)
            }
            throw CLIError(
                "cannot run '\(name)': \(String(cString: strerror(failure.number)))", exitCode: .commandNotExecutable)
        }
    }

    /// Waits for the command, passing on SIGTERM and SIGHUP; SIGINT and SIGQUIT from the terminal
    /// reach it directly. Its exit status, or 128 + the signal that ended it, as a shell reports.
    private func waitForChild(_ child: pid_t, signals: sigset_t) -> Int32 {
        var set = signals
        while true {
            var status: Int32 = 0
            let ended = waitpid(child, &status, WNOHANG)
            if ended == child {
                let signal = status & 0x7f
                return signal == 0 ? (status >> 8) & 0xff : 128 + signal
            }
            if ended < 0, errno != EINTR { return 1 }
            var received: Int32 = 0
            guard sigwait(&set, &received) == 0 else { continue }
            if received == SIGTERM || received == SIGHUP { kill(child, received) }
        }
    }
}
