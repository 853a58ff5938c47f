import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Client mode beyond the agent's own endpoints: `api`, `refresh` and `exec --proxy` through the
/// agent's proxy from a sandbox with no bus and no kernel keyring (real user and pid namespaces,
/// keyctl denied), the bound on a stopped agent, and rules the agent reads again while it runs.
@Suite("client mode through the agent's proxy", .serialized)
struct AgentClientModeTests {
    static let sandboxRules = """
        rule sandbox
            user-namespace other
            allow token *
            allow status
            allow proxy

        """

    /// A child of `exec --proxy` that asks the proxy for the client API, as a tool would.
    static let childRequest = [
        "/bin/sh", "-c",
        """
        test -z "$PORTAL_CLIENT_SESSION_TOKEN" || exit 70
        exec /usr/bin/curl -sS --noproxy '*' --max-time 20 \
            -H "$PORTAL_TOKEN_PROXY_HEADER: $PORTAL_TOKEN_PROXY_CREDENTIAL" \
            -H 'Accept: application/json' -H 'Content-Type: application/json' \
            -w '\\nstatus=%{http_code}\\n' "$PORTAL_TOKEN_PROXY_URL/api/v3/clients/me"
        """,
    ]

    @Test("in a sandbox, api, refresh and exec --proxy work through the agent as they do on the host")
    func sameAsOnTheHost() throws {
        let harness = try AgentHarness(rules: Self.sandboxRules)
        let token = try harness.signIn()
        let tool = ProcessRunner.portalTokenPath

        let hostAPI = try harness.portal.git.portalToken(["api", "/api/v3/clients/me"])
        let sandboxAPI = try harness.sandboxed([tool, "api", "/api/v3/clients/me"])
        #expect(hostAPI.exitCode == 0 && !hostAPI.stdout.isEmpty, "\(hostAPI.stderr)")
        #expect(sandboxAPI.exitCode == 0, "\(sandboxAPI.stderr) \(harness.log)")
        #expect(sandboxAPI.stdout == hostAPI.stdout)
        #expect(sandboxAPI.stderr == hostAPI.stderr)
        // Portal got the session's bearer from the agent; the sandbox never held it.
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token, token])
        #expect(!sandboxAPI.stdout.contains(token) && !sandboxAPI.stderr.contains(token))

        // A status other than 2xx is Portal's answer: its body on stdout and exit 6, as on the host.
        let hostMissing = try harness.portal.git.portalToken(["api", "/api/v3/clients/me/nothing-here"])
        let sandboxMissing = try harness.sandboxed([tool, "api", "/api/v3/clients/me/nothing-here"])
        #expect(hostMissing.exitCode == 6)
        #expect(sandboxMissing.exitCode == 6 && sandboxMissing.stdout == hostMissing.stdout)
        #expect(sandboxMissing.stderr == hostMissing.stderr)

        let hostRefresh = try harness.portal.git.portalToken(["refresh"])
        let sandboxRefresh = try harness.sandboxed([tool, "refresh"])
        #expect(hostRefresh.exitCode == 0 && sandboxRefresh.exitCode == 0, "\(sandboxRefresh.stderr)")
        let live = "portal-token: the session of user-1 is live; it expires at "
        #expect(hostRefresh.stderr.hasPrefix(live) && sandboxRefresh.stderr.hasPrefix(live), "\(sandboxRefresh.stderr)")
        #expect(sandboxRefresh.stdout.isEmpty)

        let proxied = try harness.sandboxed([tool, "exec", "--proxy", "--"] + Self.childRequest)
        #expect(proxied.exitCode == 0, "\(proxied.stdout) \(proxied.stderr) \(harness.log)")
        #expect(proxied.stdout == hostAPI.stdout + "status=200\n")
        #expect(!proxied.stdout.contains(token))
        #expect(harness.portal.requests(to: "/api/v3/clients/me").allSatisfy { $0.bearerToken == token })
        // The child's exit code is exec's, as on the host.
        let failing = try harness.sandboxed([tool, "exec", "--proxy", "--", "/bin/sh", "-c", "exit 7"])
        #expect(failing.exitCode == 7)
    }

    @Test("a 401 seen through api, refresh or exec --proxy in a sandbox ends the session and runs the hook once")
    func unauthorizedThroughTheAgent() throws {
        let harness = try AgentHarness(rules: Self.sandboxRules)
        let tool = ProcessRunner.portalTokenPath
        let commands: [[String]] = [
            [tool, "api", "/api/v3/clients/me"], [tool, "refresh"],
            [tool, "exec", "--proxy", "--"] + Self.childRequest,
        ]
        for (index, command) in commands.enumerated() {
            let token = try harness.signIn()
            harness.portal.server.revoke(token)
            let result = try harness.sandboxed(command)
            if command.contains("--proxy") {
                // The child got Portal's 401 as it came; exec's exit code is the child's.
                #expect(result.exitCode == 0 && result.stdout.contains("status=401"), "\(result.stdout)")
            } else {
                #expect(result.exitCode == 3, "\(command): \(result.stderr)")
                #expect(result.stderr.hasPrefix("portal-token: error: Portal answered HTTP 401"), "\(result.stderr)")
                #expect(result.stderr.contains("through the agent at \(harness.socket)"))
            }
            #expect(!result.stderr.contains(token))
            // The agent runs the hook once the client has its answer.
            var runs: [String] = []
            for _ in 0..<100 {
                runs = harness.portal.hookRuns.filter { !$0.hasPrefix("hook read stdin") }
                if runs.count > index { break }
                usleep(50_000)
            }
            usleep(200_000)
            runs = harness.portal.hookRuns.filter { !$0.hasPrefix("hook read stdin") }
            #expect(runs.count == index + 1, "\(command): hook runs \(runs)")
            // The session is gone for the host and for every client.
            #expect(try harness.portal.git.portalToken(["token"]).exitCode == 1)
            let after = try harness.sandboxed(command)
            #expect(after.exitCode == 1, "\(command): \(after.stdout) \(after.stderr)")
            #expect(after.stderr.contains("not signed in"), "\(after.stderr)")
        }
    }

    @Test("a stopped agent: every client-mode command exits 4 within the bound, naming the agent")
    func stoppedAgent() throws {
        let harness = try AgentHarness(rules: Self.sandboxRules)
        try harness.signIn()
        harness.agent?.signal(SIGSTOP)
        defer { harness.agent?.signal(SIGCONT) }
        let dockerHelper = harness.scratch + "/bin/docker-credential-portal-token"
        let tool = ProcessRunner.portalTokenPath
        let commands: [([String], String?)] = [
            ([tool, "token"], nil), ([tool, "get"], harness.portal.portalOrigin), ([tool, "status"], nil),
            ([tool, "list"], nil), ([tool, "exec-credential"], nil), ([tool, "api", "/api/v3/clients/me"], nil),
            ([tool, "refresh"], nil), ([tool, "exec", "--proxy", "--", "/bin/true"], nil),
            ([tool, "exec", "--", "/bin/true"], nil), ([tool, "lock"], nil),
            ([dockerHelper, "get"], "registry.example"),
        ]
        let next = Locked(0)
        let results = try concurrently(commands.count) { () -> (Int, ProcessResult) in
            let index = next.update { value in
                defer { value += 1 }
                return value
            }
            return (index, try harness.sandboxed(commands[index].0, stdin: commands[index].1, timeout: 40))
        }
        for (index, result) in results {
            let name = commands[index].0.dropFirst().joined(separator: " ")
            #expect(result.exitCode == (commands[index].0[0] == dockerHelper ? 1 : 4), "\(name): \(result.stderr)")
            #expect(result.duration < 11, "\(name): \(result.duration) s")
            let said = result.stderr + result.stdout
            #expect(said.contains("the agent at \(harness.socket) did not answer within 10000 ms"), "\(name): \(said)")
        }
        // A shorter bound is a setting.
        var environment = harness.clientEnvironment()
        environment["PORTAL_TOKEN_AGENT_TIMEOUT_MS"] = "1500"
        let quick = try ProcessRunner.run(tool, ["token"], environment: environment)
        #expect(quick.exitCode == 4 && quick.duration < 5, "\(quick.duration) s")
        #expect(quick.stderr.contains("did not answer within 1500 ms"))
    }

    @Test("a rule added while the agent runs admits the sandbox next; a broken edit keeps the rules and is logged once")
    func rulesReadAgain() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let tool = ProcessRunner.portalTokenPath
        // The agent started with no rules file where it looks by default.
        let configHome = try #require(try harness.agentEnvironment()["XDG_CONFIG_HOME"])
        let rulesPath = configHome + "/portal-token/agent.rules"
        func write(_ rules: String) throws {
            mkdir(configHome, 0o700)
            mkdir(configHome + "/portal-token", 0o700)
            try rules.write(toFile: rulesPath, atomically: true, encoding: .utf8)
            chmod(rulesPath, 0o600)
        }
        #expect(!FileManager.default.fileExists(atPath: rulesPath))
        let refused = try harness.sandboxed([tool, "token"])
        #expect(refused.exitCode == 4 && refused.stderr.contains("decided by default"), "\(refused.stderr)")

        try write(Self.sandboxRules)
        let admitted = try harness.sandboxed([tool, "token"])
        #expect(admitted.exitCode == 0 && admitted.stdout == token + "\n", "\(admitted.stderr) \(harness.log)")
        #expect(harness.log.contains("the rules file \(rulesPath) changed; read it again: 1 rule"))

        // A mistake on line 3: the rules read before stay in force, and the log says so once.
        try write("rule sandbox\n    user-namespace other\n    allow tokens *\n")
        for _ in 0..<3 {
            let kept = try harness.sandboxed([tool, "token"])
            #expect(kept.exitCode == 0 && kept.stdout == token + "\n", "\(kept.stderr)")
        }
        let reports = harness.log.components(separatedBy: "changed and is refused").count - 1
        #expect(reports == 1, "\(harness.log)")
        #expect(harness.log.contains("line 3"))

        // Removed: the default alone decides again.
        unlink(rulesPath)
        let gone = try harness.sandboxed([tool, "token"])
        #expect(gone.exitCode == 4 && gone.stderr.contains("decided by default"), "\(gone.stderr)")
        #expect(harness.log.contains("it is gone, so the default alone decides"))

        // A file another user could have written grants nothing, however generous.
        try write(Self.sandboxRules)
        chmod(rulesPath, 0o666)
        let foreign = try harness.sandboxed([tool, "token"])
        #expect(foreign.exitCode == 4 && foreign.stderr.contains("decided by default"), "\(foreign.stderr)")
        #expect(harness.log.contains("others may write to it (mode 666)"), "\(harness.log)")
        // The agent's own user was served throughout.
        #expect(try harness.client(["token"]).stdout == token + "\n")
    }

    @Test("what the agent serves no client is refused naming it; proxy --listen sends to the agent's proxy")
    func refusedAndProxied() throws {
        let harness = try AgentHarness(rules: Self.sandboxRules)
        let token = try harness.signIn()
        for arguments in [
            ["login", "--with-token"], ["logout"], ["migrate", "--to", "file"], ["file-key"], ["unlock"],
            ["redirect", "https://app.example/done?code=1"], ["verify-totp", "123456"],
        ] {
            let result = try harness.sandboxed([ProcessRunner.portalTokenPath] + arguments, stdin: token + "\n")
            #expect(result.exitCode == 4, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(
                result.stderr.contains("\(arguments[0]) is not served through the agent at \(harness.socket)"),
                "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains(token))
        }
        // The agent's session is untouched.
        #expect(try harness.client(["token"]).stdout == token + "\n")

        let proxy = try RunningProcess(
            ProcessRunner.portalTokenPath, ["proxy", "--listen", "127.0.0.1:0"],
            environment: harness.clientEnvironment())
        defer { proxy.signal(SIGTERM) }
        var lines: [String: String] = [:]
        for _ in 0..<200 where lines["PORTAL_TOKEN_PROXY_CREDENTIAL"] == nil {
            usleep(25_000)
            for line in proxy.stdout.split(separator: "\n") {
                let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { lines[parts[0]] = parts[1] }
            }
        }
        let url = try #require(lines["PORTAL_TOKEN_PROXY_URL"], "\(proxy.stdout) \(proxy.stderr)")
        let credential = try #require(lines["PORTAL_TOKEN_PROXY_CREDENTIAL"])
        let answer = try ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-sS", "--noproxy", "*", "--max-time", "20", "-H", "Portal-Token-Proxy: \(credential)",
                "-H", "Accept: application/json", "-H", "Content-Type: application/json",
                "-w", "\nstatus=%{http_code}\n", url + "/api/v3/clients/me",
            ])
        #expect(answer.stdout.contains("status=200"), "\(answer.stdout) \(answer.stderr) \(harness.log)")
        #expect(!answer.stdout.contains(token))
        #expect(harness.portal.requests(to: "/api/v3/clients/me").last?.bearerToken == token)
    }
}
