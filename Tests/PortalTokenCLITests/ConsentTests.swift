import Foundation
import PortalTokenTestSupport
import Testing

/// An agent whose rules ask, on a private session bus where contrib/testing/notification-server.py
/// stands in for the desktop: it records every notification and answers as told.
final class ConsentHarness: @unchecked Sendable {
    let agent: AgentHarness
    let bus: PrivateKeyring?
    let server: pid_t?
    let token: String
    var directory: String { agent.scratch + "/notifications" }

    static let serverScript = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("contrib/testing/notification-server.py").path

    /// `rule` holds the rule's conditions and grant lines, without its `rule` line; with `desktop`
    /// false the agent has no session bus at all, as on a server.
    /// `serverWrapper` runs the notification server under another program (`unshare -Ur`).
    init(rule: String, askTimeoutMilliseconds: Int = 20_000, desktop: Bool = true, serverWrapper: [String] = [])
        throws
    {
        agent = try AgentHarness(rules: "rule asked\n" + rule, start: false)
        mkdir(agent.scratch + "/notifications", 0o700)
        if desktop {
            let bus = try PrivateKeyring(withKeyring: false)
            self.bus = bus
            let command = serverWrapper + ["/usr/bin/python3", Self.serverScript, agent.scratch + "/notifications"]
            server = try ProcessRunner.spawn(
                command[0], Array(command.dropFirst()), environment: bus.environment,
                stderr: agent.scratch + "/notifications/server.log")
            let deadline = Date().addingTimeInterval(15)
            while !FileManager.default.fileExists(atPath: agent.scratch + "/notifications/ready") {
                guard Date() < deadline else {
                    let log =
                        (try? String(contentsOfFile: agent.scratch + "/notifications/server.log", encoding: .utf8))
                    throw ConsentSetupFailure("the notification server did not start: \(log ?? "")")
                }
                usleep(20_000)
            }
        } else {
            bus = nil
            server = nil
        }
        try agent.start(environmentChanges: [
            "DBUS_SESSION_BUS_ADDRESS": bus?.busAddress, "PORTAL_TOKEN_ASK_TIMEOUT_MS": String(askTimeoutMilliseconds),
        ])
        token = try agent.signIn()
    }

    deinit {
        agent.stop()
        if let server {
            kill(server, SIGKILL)
            _ = waitpid(server, nil, 0)
        }
    }

    /// What the notification server does with the next notifications.
    func answer(_ action: String) throws {
        try action.write(toFile: directory + "/answer", atomically: true, encoding: .utf8)
    }

    /// Every notification shown so far.
    var notifications: [[String: Any]] {
        let text = (try? String(contentsOfFile: directory + "/notifications.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// A caller of its own: a copy of portal-token under another name (the agent keeps an
    /// answer for the executable's path and contents).
    func caller(_ name: String) throws -> String {
        let path = agent.scratch + "/bin/" + name
        // Copied by cp, so that no descriptor of the test process, inherited by a child another
        // test starts meanwhile, holds the copy open for writing (exec would fail, ETXTBSY).
        if !FileManager.default.fileExists(atPath: path) {
            let copied = try ProcessRunner.run("/bin/cp", [ProcessRunner.portalTokenPath, path])
            guard copied.exitCode == 0 else { throw ConsentSetupFailure("cp failed: \(copied.stderr)") }
        }
        return path
    }

    /// `CALLER token` in client mode.
    func token(by caller: String, environment changes: [String: String] = [:]) throws -> ProcessResult {
        var environment = agent.clientEnvironment()
        for (name, value) in changes { environment[name] = value }
        return try ProcessRunner.run(caller, ["token"], environment: environment, timeout: 60)
    }

    /// `portal-token approve ARGUMENTS` as the agent's own user.
    func approve(_ arguments: [String] = []) throws -> ProcessResult {
        try agent.client(["approve"] + arguments)
    }

    /// Waits until the agent lists `count` open questions; their ids.
    func waitForQuestions(_ count: Int = 1, timeout: Double = 15) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let listed = try approve()
            let ids = listed.stdout.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("q"), let colon = line.firstIndex(of: ":") else { return nil }
                return String(line[..<colon])
            }
            if ids.count >= count { return ids }
            guard Date() < deadline else {
                throw ConsentSetupFailure("no question was asked: \(listed.stdout)\(agent.log)")
            }
            usleep(50_000)
        }
    }
}

@Suite("asking the user: ask rules, the desktop notification and portal-token approve", .serialized)
struct ConsentTests {
    @Test("allow serves the request; the answer is kept for that caller for the idle time, and at most the cap")
    func allowIdleAndCap() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n    remember 3s 6s\n")
        try harness.answer("allow")
        let caller = try harness.caller("caller-a")
        let first = try harness.token(by: caller)
        #expect(first.exitCode == 0 && first.stdout == harness.token + "\n", "\(first.stderr)")
        let shown = try #require(harness.notifications.first)
        #expect(harness.notifications.count == 1)
        #expect(shown["actions"] as? [String] == ["allow", "Allow", "deny", "Deny"])
        #expect((shown["body"] as? String)?.contains("exe \(caller)") == true, "\(shown)")
        #expect((shown["body"] as? String)?.contains("rule asked") == true)
        for field in ["summary", "body"] {
            let text = shown[field] as? String ?? ""
            #expect(!text.contains(harness.token.prefix(8)), "the token is in the notification's \(field)")
        }
        // Within the idle time: no question.
        let again = try harness.token(by: caller)
        #expect(again.exitCode == 0 && harness.notifications.count == 1, "\(again.stderr)")
        // Another caller is asked for itself.
        #expect(try harness.token(by: try harness.caller("caller-b")).exitCode == 0)
        #expect(harness.notifications.count == 2)
        // Past the idle time: asked again.
        sleep(4)
        #expect(try harness.token(by: caller).exitCode == 0)
        #expect(harness.notifications.count == 3)
        // Used every second, the answer still ends at the cap, 6 s after it was given.
        let answered = Date()
        while Date().timeIntervalSince(answered) < 4.5 {
            usleep(900_000)
            #expect(try harness.token(by: caller).exitCode == 0)
        }
        #expect(harness.notifications.count == 3, "asked again before the cap")
        while Date().timeIntervalSince(answered) < 6.5 { usleep(200_000) }
        #expect(try harness.token(by: caller).exitCode == 0)
        #expect(harness.notifications.count == 4, "not asked again at the cap")
        #expect(!harness.agent.log.contains(harness.token.prefix(8)))
    }

    @Test("a sandbox sharing the caller's program, uid and cgroup but not its mounts is asked for itself")
    func mountNamespaceNamesTheCaller() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n")
        try harness.answer("allow")
        let caller = try harness.caller("caller-mounts")
        #expect(try harness.token(by: caller).exitCode == 0)
        #expect(harness.notifications.count == 1)
        // bwrap as root makes a mount namespace and no user namespace: only the mounts differ.
        let sandboxed = try ProcessRunner.run(
            "/usr/bin/bwrap", ["--dev-bind", "/", "/", caller, "token"], environment: harness.agent.clientEnvironment(),
            timeout: 60)
        #expect(sandboxed.exitCode == 0 && sandboxed.stdout == harness.token + "\n", "\(sandboxed.stderr)")
        #expect(harness.notifications.count == 2, "the sandbox was served on the answer given to the host's caller")
    }

    @Test("callers that make themselves new get at most 4 open questions; another group of callers is still asked")
    func openQuestionsAreBounded() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n", askTimeoutMilliseconds: 6000)
        try harness.answer("none")
        // Each in a mount namespace of its own: new callers of one program, one group.
        let sandbox = ["--dev-bind", "/", "/", ProcessRunner.portalTokenPath, "token"]
        let waiting = try (0..<4).map { _ in
            try RunningProcess("/usr/bin/bwrap", sandbox, environment: harness.agent.clientEnvironment())
        }
        #expect(try harness.waitForQuestions(4).count == 4)
        let refused = try ProcessRunner.run(
            "/usr/bin/bwrap", sandbox, environment: harness.agent.clientEnvironment(), timeout: 30)
        #expect(refused.exitCode == 4, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("not approved, and not asked: 4 questions of callers like this one already wait"),
            "\(refused.stderr)")
        #expect(refused.duration < 3, "\(refused.duration) s")
        #expect(harness.notifications.count == 4)
        // A caller in another user namespace is another group: it is asked.
        let other = try RunningProcess(
            "/usr/bin/unshare", ["-Ur", ProcessRunner.portalTokenPath, "token"],
            environment: harness.agent.clientEnvironment())
        #expect(try harness.waitForQuestions(5).count == 5)
        for request in waiting + [other] {
            let result = try request.finish(timeout: 30)
            #expect(result.exitCode == 4 && result.stderr.contains("no answer within 6 s"), "\(result.stderr)")
        }
    }

    @Test("deny refuses with 403 'not approved' and is kept; agent --forget drops it")
    func denyIsRemembered() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n")
        try harness.answer("deny")
        let caller = try harness.caller("caller-denied")
        let denied = try harness.token(by: caller)
        #expect(denied.exitCode == 4 && denied.stdout.isEmpty)
        #expect(denied.stderr.contains("not approved: the user denied it"), "\(denied.stderr)")
        #expect(denied.stderr.contains("portal-token approve"), "\(denied.stderr)")
        let kept = try harness.token(by: caller)
        #expect(kept.exitCode == 4 && kept.stderr.contains("kept from earlier"), "\(kept.stderr)")
        #expect(harness.notifications.count == 1)
        // Refusals and approvals are kept apart: forgetting drops the refusal, and the next
        // request is asked about again.
        let forgot = try harness.agent.client(["agent", "--forget"])
        #expect(forgot.exitCode == 0 && forgot.stderr.contains("forgot 0 approvals and 1 refusal"), "\(forgot.stderr)")
        try harness.answer("allow")
        #expect(try harness.token(by: caller).exitCode == 0)
        #expect(harness.notifications.count == 2)
    }

    @Test("a proxied request a rule asks about waits for the answer (curl takes the agent's 102), then is served")
    func askedProxy() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask proxy GET /api/v3/clients/me\n")
        try harness.answer("allow")
        for round in 1...2 {
            let curl = try AgentProxyTests.curl(harness.agent.socket)
            #expect(curl.stdout.contains("HTTP/1.1 102 Processing") == (round == 1), "round \(round): \(curl.stdout)")
            #expect(curl.stdout.hasSuffix("status=200\n"), "round \(round): \(curl.stdout) \(harness.agent.log)")
            #expect(harness.notifications.count == 1, "round \(round)")
        }
        try harness.answer("deny")
        #expect(try harness.agent.client(["agent", "--forget"]).exitCode == 0)
        let refused = try AgentProxyTests.curl(harness.agent.socket)
        #expect(refused.stdout.hasSuffix("status=403\n"), "\(refused.stdout)")
        #expect(refused.stdout.contains("not approved: the user denied it"), "\(refused.stdout)")
        #expect(harness.notifications.count == 2)
    }

    @Test("10 concurrent requests of one caller make one question, which portal-token approve answers for all")
    func concurrentRequestsOneQuestion() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n")
        try harness.answer("none")
        let caller = try harness.caller("caller-many")
        let waiting = try (0..<10).map { _ in
            try RunningProcess(caller, ["token"], environment: harness.agent.clientEnvironment())
        }
        let ids = try harness.waitForQuestions()
        // Give every request its time to arrive and join the question.
        usleep(500_000)
        #expect(try harness.waitForQuestions() == ids)
        #expect(ids.count == 1)
        let approved = try harness.approve([ids[0]])
        #expect(approved.exitCode == 0 && approved.stderr.contains("question \(ids[0]): allowed"), "\(approved.stderr)")
        for request in waiting {
            let result = try request.finish(timeout: 30)
            #expect(result.exitCode == 0 && result.stdout == harness.token + "\n", "\(result.stderr)")
        }
        #expect(harness.notifications.count == 1)
        // The notification answered elsewhere is taken away.
        let closed = (try? String(contentsOfFile: harness.directory + "/closed", encoding: .utf8)) ?? ""
        #expect(closed == "1\n", "\(closed)")
        // The same question cannot be answered twice.
        #expect(try harness.approve(["--deny", ids[0]]).exitCode == 1)
    }

    @Test(
        "no answer within the bound: 403 'not approved', nothing kept; a forged answer from another client is ignored"
    )
    func unansweredAndForged() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n", askTimeoutMilliseconds: 2500)
        try harness.answer("none")
        let caller = try harness.caller("caller-slow")
        // The client's own bound (1 s) is shorter than the question's: the agent's 102 says to wait.
        let request = try RunningProcess(
            caller, ["token"],
            environment: harness.agent.clientEnvironment().merging(["PORTAL_TOKEN_AGENT_TIMEOUT_MS": "1000"]) { $1 })
        let deadline = Date().addingTimeInterval(10)
        while harness.notifications.isEmpty && Date() < deadline { usleep(20_000) }
        let id = try #require(harness.notifications.first?["id"] as? Int)
        // Any client of the session bus can emit the server's signal; only the server's counts.
        let bus = try #require(harness.bus)
        let forged = try ProcessRunner.run(
            "/usr/bin/gdbus",
            [
                "emit", "--session", "--object-path", "/org/freedesktop/Notifications", "--signal",
                "org.freedesktop.Notifications.ActionInvoked", "uint32 \(id)", "allow",
            ], environment: bus.environment, timeout: 10)
        #expect(forged.exitCode == 0, "\(forged.stderr)")
        let result = try request.finish(timeout: 30)
        #expect(result.exitCode == 4 && result.stdout.isEmpty, "\(result.stderr)")
        #expect(result.stderr.contains("not approved: no answer within 2.5 s"), "\(result.stderr)")
        #expect(!result.stderr.contains("did not answer within"), "\(result.stderr)")
        // Nothing was kept: the next request is asked about again.
        try harness.answer("allow")
        #expect(try harness.token(by: caller).exitCode == 0)
        #expect(harness.notifications.count == 2)
    }

    @Test("with no desktop, portal-token approve answers over a terminal; a sandboxed caller cannot answer itself")
    func terminalRoute() throws {
        let harness = try ConsentHarness(rule: "    user-namespace other\n    ask token *\n", desktop: false)
        let request = try RunningProcess(
            "/usr/bin/unshare",
            ["-Urpf", "--mount-proc", try AgentHarness.denyKeyctl(), ProcessRunner.portalTokenPath, "token"],
            environment: harness.agent.clientEnvironment())
        let ids = try harness.waitForQuestions()
        #expect(harness.agent.log.contains("is not on the desktop (no session bus"), "\(harness.agent.log)")
        // The sandbox asking cannot answer for itself, nor list the questions.
        for arguments in [["approve", ids[0]], ["approve"]] {
            let itself = try harness.agent.sandboxed([ProcessRunner.portalTokenPath] + arguments)
            #expect(itself.exitCode == 4, "\(arguments): \(itself.stderr)")
            #expect(itself.stderr.contains("only the agent's own user"), "\(itself.stderr)")
        }
        var environment = harness.agent.clientEnvironment()
        environment["DISPLAY"] = nil
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        let terminal = try TerminalProcess(ProcessRunner.portalTokenPath, ["approve"], environment: environment)
        try terminal.waitFor("[a]llow, [d]eny, Enter to leave it: ")
        #expect(terminal.text.contains("\(ids[0]): uid "), "\(terminal.text)")
        #expect(terminal.text.contains("asks for the token of environment"), "\(terminal.text)")
        terminal.type("a\n")
        try terminal.waitFor("allowed")
        #expect(try terminal.finish() == 0)
        let served = try request.finish(timeout: 30)
        #expect(served.exitCode == 0 && served.stdout == harness.token + "\n", "\(served.stderr)")
    }

    @Test("another uid that reaches the main socket can neither list, answer nor forget the agent's questions")
    func anotherUserCannotAnswer() throws {
        try #require(geteuid() == 0, "calling as another uid needs root")
        let harness = try ConsentHarness(rule: "    any-caller\n    ask token *\n", desktop: false)
        let request = try RunningProcess(
            try harness.caller("caller-waiting"), ["token"], environment: harness.agent.clientEnvironment())
        let ids = try harness.waitForQuestions()
        // As if the socket were bound where the file mode does not stop another user.
        for directory in [harness.agent.scratch, harness.agent.runtime, harness.agent.runtime + "/portal-token"] {
            chmod(directory, 0o755)
        }
        chmod(harness.agent.socket, 0o666)
        func asNobody(_ method: String, _ path: String, _ body: String? = nil) throws -> ProcessResult {
            try ProcessRunner.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s", "-i", "-X", method]
                    + (body.map { ["-H", "Content-Type: application/json", "--data", $0] } ?? [])
                    + ["--unix-socket", harness.agent.socket, "http://localhost" + path],
                environment: harness.agent.clientEnvironment())
        }
        let attempts = [
            try asNobody("GET", "/v1/consent"),
            try asNobody("POST", "/v1/consent/answer", #"{"id":"\#(ids[0])","answer":"allow"}"#),
            try asNobody("POST", "/v1/consent/forget"),
        ]
        for attempt in attempts {
            #expect(attempt.stdout.hasPrefix("HTTP/1.1 403 "), "\(attempt.stdout) \(attempt.stderr)")
            #expect(attempt.stdout.contains("only the agent's own user"), "\(attempt.stdout)")
            #expect(!attempt.stdout.contains(ids[0]), "\(attempt.stdout)")
        }
        // The question still waits, unanswered, for the agent's own user.
        #expect(try harness.waitForQuestions() == ids)
        #expect(try harness.approve(["--deny", ids[0]]).exitCode == 0)
        let result = try request.finish(timeout: 30)
        #expect(result.exitCode == 4 && result.stderr.contains("the user denied it"), "\(result.stderr)")
    }

    @Test("a notification server in another user namespace is not trusted: the question waits for the terminal")
    func foreignNotificationServer() throws {
        let harness = try ConsentHarness(
            rule: "    any-caller\n    ask token *\n", serverWrapper: ["/usr/bin/unshare", "-Ur"])
        // It would allow at once, if it were asked.
        try harness.answer("allow")
        let request = try RunningProcess(
            try harness.caller("caller-foreign"), ["token"], environment: harness.agent.clientEnvironment())
        let ids = try harness.waitForQuestions()
        #expect(harness.notifications.isEmpty)
        #expect(
            harness.agent.log.contains("is not this user's own in this user namespace, so its answers are not taken"),
            "\(harness.agent.log)")
        #expect(try harness.approve(["--deny", ids[0]]).exitCode == 0)
        let result = try request.finish(timeout: 30)
        #expect(result.exitCode == 4 && result.stderr.contains("not approved: the user denied it"), "\(result.stderr)")
    }

    @Test("an agent that is not root asks about portal-token's own clients, whose executable the kernel hides from it")
    func agentOfAnOrdinaryUser() throws {
        try #require(geteuid() == 0, "running the agent as another user needs root")
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-ask-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = root + "/home"
        #expect(mkdir(root, 0o755) == 0)
        for directory in [home, home + "/run", home + "/.config", home + "/.config/portal-token"] {
            #expect(mkdir(directory, 0o700) == 0)
            chown(directory, nobody.pw_uid, nobody.pw_gid)
        }
        let rules = home + "/.config/portal-token/agent.rules"
        try "rule asked\n    any-caller\n    ask git-get *\n".write(toFile: rules, atomically: false, encoding: .utf8)
        chmod(rules, 0o600)
        chown(rules, nobody.pw_uid, nobody.pw_gid)
        let environment = [
            "PATH": "/usr/bin:/bin", "HOME": home, "XDG_RUNTIME_DIR": home + "/run",
            "PORTAL_TOKEN_BACKEND": "file", "PORTAL_TOKEN_PASSPHRASE": "ask test passphrase",
        ]
        let asNobody = ["/usr/bin/setpriv", "--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups"]
        let agent = try RunningProcess(
            asNobody[0], Array(asNobody.dropFirst()) + [ProcessRunner.portalTokenPath, "agent"],
            environment: environment)
        defer {
            agent.signal(SIGKILL)
            _ = try? agent.finish(timeout: 10)
        }
        try agent.waitForStderr(containing: "listening on")
        var client = environment
        client["PORTAL_TOKEN_AGENT_SOCK"] = home + "/run/portal-token/agent.sock"
        func get() throws -> RunningProcess {
            try RunningProcess(
                asNobody[0], Array(asNobody.dropFirst()) + [ProcessRunner.portalTokenPath, "get"], environment: client,
                stdin: "protocol=https\nhost=example.org\n\n")
        }
        func approve(_ arguments: [String]) throws -> ProcessResult {
            try ProcessRunner.run(
                asNobody[0], Array(asNobody.dropFirst()) + [ProcessRunner.portalTokenPath, "approve"] + arguments,
                environment: client, timeout: 30)
        }
        let first = try get()
        var id: String?
        let deadline = Date().addingTimeInterval(15)
        while id == nil, Date() < deadline {
            id = try approve([]).stdout.split(separator: "\n").first { $0.hasPrefix("q") }
                .map { String($0.prefix { $0 != ":" }) }
            if id == nil { usleep(50_000) }
        }
        let question = try #require(id, "no question was asked: \(agent.stderr)")
        #expect(try approve([question]).exitCode == 0)
        let served = try first.finish(timeout: 30)
        #expect(served.exitCode == 0 && served.stdout.isEmpty, "\(served.stderr)")
        // The answer is kept for this caller: the next one is served unasked.
        let again = try get().finish(timeout: 30)
        #expect(again.exitCode == 0, "\(again.stderr)")
        #expect(agent.stderr.components(separatedBy: "asking the user").count == 2, "\(agent.stderr)")
    }

    @Test(
        "the agent's routes, refusals and questions answer another method with 405 and Allow; HEAD goes with GET"
    )
    func methods() throws {
        let harness = try ConsentHarness(rule: "    any-caller\n    allow status\n    ask token *\n", desktop: false)
        for (method, path, allow) in [
            ("POST", "/v1/token", "GET"), ("GET", "/v1/lock", "POST"), ("POST", "/v1/refusals", "GET"),
            ("POST", "/v1/consent", "GET"), ("GET", "/v1/consent/answer", "POST"),
            ("PUT", "/v1/consent/forget", "POST"),
        ] {
            let answer = rawExchange(
                harness.agent.socket,
                Array("\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".utf8))
            #expect(statusCode(answer) == 405, "\(method) \(path): \(answer ?? "")")
            #expect(answer?.contains("\r\nAllow: \(allow)\r\n") == true, "\(method) \(path): \(answer ?? "")")
            #expect(answer?.contains("\(path) takes \(allow)") == true, "\(method) \(path): \(answer ?? "")")
        }
        for path in ["/v1/status", "/v1/refusals", "/v1/consent"] {
            let answer = rawExchange(
                harness.agent.socket,
                Array("HEAD \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8))
            #expect(statusCode(answer) == 200, "HEAD \(path): \(answer ?? "")")
        }
    }

    @Test("check-rules names a rule that asks; a rules file's ask and remember lines are checked")
    func checkRules() throws {
        let harness = try ConsentHarness(
            rule: "    any-caller\n    ask git-get github.com\n    remember 5m 1h\n", desktop: false)
        let checked = try harness.agent.client([
            "agent", "--check-rules", "--caller", "uid=\(getuid())", "--asks", "git-get github.com",
            harness.agent.rulesPath,
        ])
        #expect(checked.exitCode == 1)
        #expect(
            checked.stdout.contains(
                "asks the user first: rule asked's 'ask git-get github.com' (an answer is kept 5m idle, 1h at most)"),
            "\(checked.stdout)")
        try harness.agent.write(rules: "rule asked\n    any-caller\n    remember 2h 1h\n")
        let wrong = try harness.agent.client(["agent", "--check-rules", harness.agent.rulesPath])
        #expect(
            wrong.exitCode == 2 && wrong.stderr.contains("line 3: 'remember': the idle time is longer than the cap"),
            "\(wrong.stderr)")
    }
}

struct ConsentSetupFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
