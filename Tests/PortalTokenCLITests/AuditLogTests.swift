import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The audit log end to end (docs/audit.md): the built binary, the encrypted file store, the fake
/// Portal server, and the log in the harness's own XDG_STATE_HOME.
@Suite("the audit log")
struct AuditLogTests {
    static let schema = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/audit.schema.json").path

    /// The log of a harness.
    struct Log {
        let directory: String
        var path: String { directory + "/audit.jsonl" }
        var rotatedPath: String { path + ".1" }

        init(_ environment: [String: String]) throws {
            directory = try #require(environment["XDG_STATE_HOME"]) + "/portal-token"
        }

        func lines(_ file: String? = nil) -> [String] {
            let text = (try? String(contentsOfFile: file ?? path, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").map(String.init)
        }

        var entries: [[String: Any]] {
            lines().map { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] ?? [:] }
        }

        var last: [String: Any] { entries.last ?? [:] }

        /// Everything the log's files hold, rotated file included.
        var everything: String {
            [rotatedPath, path].map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }.joined()
        }

        func size(_ file: String) -> Int {
            var status = stat()
            return stat(file, &status) == 0 ? Int(status.st_size) : 0
        }
    }

    /// Every line of `files` checked against docs/audit.schema.json by a real validator
    /// (python3-jsonschema, Draft 2020-12); each file must end with a newline. Returns the count.
    static func validate(_ files: [String]) throws -> Int {
        let script = """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema)
            count = 0
            for path in sys.argv[2:]:
                data = open(path, "rb").read()
                if not data:
                    continue
                if not data.endswith(b"\\n"):
                    sys.exit("%s does not end with a newline" % path)
                for number, line in enumerate(data.split(b"\\n")[:-1], 1):
                    errors = sorted(validator.iter_errors(json.loads(line)), key=str)
                    if errors:
                        sys.exit("%s:%d: %s" % (path, number, errors[0].message))
                    count += 1
            print(count)
            """
        let existing = files.filter { FileManager.default.fileExists(atPath: $0) }
        let result = try ProcessRunner.run("/usr/bin/python3", ["-c", script, schema] + existing)
        #expect(result.exitCode == 0, "\(result.stderr)")
        return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// A token no other test uses, long enough that every 8-character piece of it is its own.
    static func canary(_ stem: String) -> String {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return stem + String((0..<40).map { _ in letters.randomElement()! })
    }

    /// Runs every command that records an event, each expected to add exactly one line with the
    /// given operation and outcome (and, where given, exit code), and requests through the proxy;
    /// checks as it goes. Returns the other tokens it used.
    @discardableResult
    static func runEveryCommand(
        _ portal: PortalHarness, token: String, secondToken: String, password: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String] {
        let log = try Log(portal.git.environment)
        let scratch = try ScratchFolder("audit")
        let docker = try DockerHelperTests.helperDirectory(scratch) + "/docker-credential-portal-token"
        let origin = portal.portalOrigin
        portal.server.registerLiveToken(token, clientID: "client-a")
        portal.server.registerLiveToken(secondToken, clientID: "client-b")
        let generic = "protocol=https\nhost=git.example.com\npath=team/repo.git\n"
        typealias Step = (arguments: [String], stdin: String?, operation: String, outcome: String, exitCode: Int32)
        let steps: [Step] = [
            (["store"], origin + "username=user-a\npassword=\(token)\n", "store", "stored", 0),
            (["get"], origin, "get", "served", 0),
            (["get"], "", "get", "served", 0),
            (["token"], nil, "token", "served", 0),
            (["token", "--format", "json"], nil, "token", "served", 0),
            (["exec", "--", "/bin/sh", "-c", "exit 0"], nil, "exec", "served", 0),
            (["exec-credential"], nil, "exec-credential", "served", 0),
            (["api", "/api/v3/clients/me"], nil, "api", "served", 0),
            (["refresh"], nil, "refresh", "served", 0),
            (["store"], generic + "username=ann\npassword=\(password)\n", "store", "stored", 0),
            (["get"], generic, "get", "served", 0),
            (["get"], "protocol=https\nhost=other.example.com\n", "get", "not-found", 0),
            (["erase"], generic, "erase", "erased", 0),
            // The same end user signs in again: one account, whose session the new token replaces.
            (["login", "--with-token", "--end-user", "user-a"], secondToken + "\n", "login", "signed-in", 0),
            (["verify-totp", "123456"], nil, "verify-totp", "not-signed-in", 1),
            // No redirect URL configured (exit 2), or not a redirect for the one configured (exit 7).
            (
                ["redirect", "http://127.0.0.1:9/elsewhere?token=x"], nil, "redirect", "failed",
                portal.git.environment["PORTAL_REDIRECT_URL"] == nil ? 2 : 7
            ),
            (["logout"], nil, "logout", "signed-out", 0),
            (["token"], nil, "token", "not-signed-in", 1),
            (["store"], origin + "username=user-a\npassword=\(token)\n", "store", "stored", 0),
            (["erase"], origin + "username=user-a\npassword=\(token)\n", "erase", "invalidated", 3),
        ]
        for step in steps {
            let before = log.lines().count
            let result = try ProcessRunner.run(
                ProcessRunner.portalTokenPath, step.arguments, stdin: step.stdin, environment: portal.git.environment)
            let what = step.arguments.joined(separator: " ")
            #expect(result.exitCode == step.exitCode, "\(what): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(log.lines().count == before + 1, "\(what) writes one line", sourceLocation: sourceLocation)
            #expect(log.last["operation"] as? String == step.operation, "\(what)", sourceLocation: sourceLocation)
            #expect(log.last["outcome"] as? String == step.outcome, "\(what)", sourceLocation: sourceLocation)
            #expect(!result.stderr.contains("audit"), "\(what): \(result.stderr)", sourceLocation: sourceLocation)
        }
        #expect(log.last["endedSession"] as? Bool == true, sourceLocation: sourceLocation)
        #expect(portal.hookRuns.count == 1, sourceLocation: sourceLocation)
        let deadToken = try runProxy(portal, token: token, password: password, sourceLocation: sourceLocation)

        let registry = "registry.example.com:5000"
        let dockerSteps: [(String, String, String, String, Int32)] = [
            (
                "store", #"{"ServerURL":"\#(registry)","Username":"robot","Secret":"\#(password)"}"#, "docker-store",
                "stored", 0
            ),
            ("get", registry, "docker-get", "served", 0),
            ("list", "", "docker-list", "served", 0),
            ("erase", registry, "docker-erase", "erased", 0),
            ("get", registry, "docker-get", "not-found", 1),
        ]
        for (operation, input, name, outcome, code) in dockerSteps {
            let before = log.lines().count
            let result = try ProcessRunner.run(docker, [operation], stdin: input, environment: portal.git.environment)
            #expect(result.exitCode == code, "docker \(operation): \(result.stdout)", sourceLocation: sourceLocation)
            #expect(log.lines().count == before + 1, "docker \(operation)", sourceLocation: sourceLocation)
            #expect(log.last["operation"] as? String == name, sourceLocation: sourceLocation)
            #expect(log.last["outcome"] as? String == outcome, sourceLocation: sourceLocation)
        }

        // Reading the log and the commands that hand out no credential write nothing.
        let before = log.lines().count
        for arguments in [["audit"], ["status"], ["list"], ["capability"], ["--help"]] {
            _ = try ProcessRunner.run(
                ProcessRunner.portalTokenPath, arguments, stdin: "", environment: portal.git.environment)
        }
        #expect(log.lines().count == before, sourceLocation: sourceLocation)
        return [deadToken]
    }

    /// The proxy's lines (docs/audit.md, "The proxy's lines"): `exec --proxy` writes its own, and
    /// each request forwarded or refused one more, on the loopback listener and on a Unix socket;
    /// a 401 to the session's token ends it on exactly one line. Returns the token that Portal
    /// refused.
    static func runProxy(
        _ portal: PortalHarness, token: String, password: String, sourceLocation: SourceLocation
    ) throws -> String {
        let log = try Log(portal.git.environment)
        #expect(try portal.adopt(token: token, endUserID: "user-a").exitCode == 0, sourceLocation: sourceLocation)
        var before = log.lines().count
        let script = """
            u="http://$PORTAL_API_HOST"
            w() { c -o /dev/null -w '%{http_code}\n' "$@"; }
            w -H "$H" $J "$u/api/v3/clients/me"
            w -H "$H" -H "Host: elsewhere.example" "$u/api/v3/clients/me"
            w $J "$u/api/v3/clients/me"
            w -H "$PORTAL_TOKEN_PROXY_HEADER: wrong" "$u/api/v3/clients/me"
            w -H "$H" -X TRACE "$u/api/v3/clients/me"
            w -H "$H" "$u/api/v3/auth/private-path?secret=\(password)"
            w -H "$H" -H "Authorization: Bearer \(password)" $J "$u/api/v3/clients/me"
            """
        let result = try ProxyTests.exec(portal, script)
        #expect(result.exitCode == 0, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout == "200\n403\n412\n403\n405\n403\n401\n", sourceLocation: sourceLocation)
        let entries = Array(log.entries.dropFirst(before))
        typealias Expected = (operation: String, outcome: String, method: String?, status: Int?, token: Bool)
        let expected: [Expected] = [
            ("exec", "served", nil, nil, true),
            ("proxy", "served", "GET", 200, true),
            // A foreign Host: the first request failing the Host or marker check in this process.
            ("proxy", "refused", "GET", 403, false),
            // No marker and a wrong credential are counted, not written; the next refusal's line
            // carries their count (docs/audit.md, "Refusals").
            ("proxy", "refused", "TRACE", 405, false),
            ("proxy", "refused", "GET", 403, false),
            // The client's own Authorization: the session is neither named nor ended.
            ("proxy", "served", "GET", 401, false),
        ]
        #expect(entries.count == expected.count, "\(log.lines().dropFirst(before))", sourceLocation: sourceLocation)
        let fingerprint = entries.first?["tokenFingerprint"] as? String
        #expect(fingerprint != nil, sourceLocation: sourceLocation)
        for (entry, want) in zip(entries, expected) {
            let line = "\(entry)"
            #expect(entry["operation"] as? String == want.operation, "\(line)", sourceLocation: sourceLocation)
            #expect(entry["outcome"] as? String == want.outcome, "\(line)", sourceLocation: sourceLocation)
            #expect(entry["exitCode"] == nil && entry["endedSession"] == nil, "\(line)", sourceLocation: sourceLocation)
            #expect(entry["authEnvironmentId"] as? String == portal.environmentID, sourceLocation: sourceLocation)
            #expect(
                entry["tokenFingerprint"] as? String == (want.token ? fingerprint : nil), "\(line)",
                sourceLocation: sourceLocation)
            #expect(
                entry["endUserId"] as? String == (want.token ? "user-a" : nil), "\(line)",
                sourceLocation: sourceLocation
            )
            guard want.operation == "proxy" else { continue }
            #expect(entry["method"] as? String == want.method, "\(line)", sourceLocation: sourceLocation)
            #expect(entry["httpStatus"] as? Int == want.status, "\(line)", sourceLocation: sourceLocation)
            // Anyone on the host can reach a loopback port: no process is named.
            let caller = entry["caller"] as? [String: Any]
            #expect(caller?["socket"] as? String == "tcp", "\(line)", sourceLocation: sourceLocation)
            #expect(caller?["pid"] == nil && caller?["executable"] == nil, "\(line)", sourceLocation: sourceLocation)
        }
        #expect(
            entries.map { $0["unwrittenRefusals"] as? Int } == [nil, nil, nil, 2, nil, nil],
            sourceLocation: sourceLocation)
        #expect(!log.everything.contains("private-path"), "a path", sourceLocation: sourceLocation)

        // On a Unix socket the kernel names the caller: curl, run by this test.
        let directory = "/tmp/portal-token-proxy-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/proxy.sock"
        before = log.lines().count
        let proxy = try ProcessRunner.spawn(
            ProcessRunner.portalTokenPath, ["proxy", "--socket", socket], environment: portal.git.environment)
        var waited = 0
        while !FileManager.default.fileExists(atPath: socket), waited < 100 {
            usleep(100_000)
            waited += 1
        }
        let curl = try ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--unix-socket", socket, "-o", "/dev/null", "-w", "%{http_code}", "-H",
                "Accept: application/json", "-H", "Content-Type: application/json",
                "http://localhost/api/v3/clients/me",
            ])
        // The line follows the answer (a 401's hook may run in between): wait for it, then stop.
        waited = 0
        while log.lines().count == before, waited < 100 {
            usleep(50_000)
            waited += 1
        }
        kill(proxy, SIGTERM)
        _ = waitpid(proxy, nil, 0)
        #expect(curl.stdout == "200", "\(curl.stderr)", sourceLocation: sourceLocation)
        #expect(log.lines().count == before + 1, "one line for the request, none for the command")
        let served = log.last
        #expect(served["operation"] as? String == "proxy" && served["outcome"] as? String == "served")
        #expect(served["tokenFingerprint"] as? String == fingerprint, sourceLocation: sourceLocation)
        let caller = served["caller"] as? [String: Any]
        #expect(caller?["socket"] as? String == socket, sourceLocation: sourceLocation)
        #expect((caller?["pid"] as? Int ?? 0) > 1, "\(served)", sourceLocation: sourceLocation)
        #expect(caller?["uid"] as? Int == Int(getuid()) && caller?["gid"] as? Int == Int(getgid()))
        #expect((caller?["executable"] as? String)?.hasSuffix("/curl") == true, "\(served)")
        #expect((caller?["parents"] as? [String])?.isEmpty == false, "the test runner started curl")
        #expect(caller?["userNamespace"] != nil, sourceLocation: sourceLocation)

        // A 401 to the session's token ends the session: the one line that did says so.
        let dead = canary("tok")
        #expect(try portal.adopt(token: dead, endUserID: "user-a").exitCode == 0, sourceLocation: sourceLocation)
        before = log.lines().count
        let ended = try ProxyTests.exec(
            portal, #"c -o /dev/null -w '%{http_code}' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me""#)
        #expect(ended.stdout == "401", "\(ended.stderr)", sourceLocation: sourceLocation)
        let last = Array(log.entries.dropFirst(before))
        #expect(last.map { $0["operation"] as? String } == ["exec", "proxy"], sourceLocation: sourceLocation)
        #expect(last.last?["outcome"] as? String == "unauthorized", sourceLocation: sourceLocation)
        #expect(last.last?["endedSession"] as? Bool == true, sourceLocation: sourceLocation)
        #expect(last.last?["httpStatus"] as? Int == 401, sourceLocation: sourceLocation)
        #expect(last.last?["tokenFingerprint"] != nil && last.last?["tokenFingerprint"] as? String != fingerprint)
        #expect(portal.hookRuns.count == 2, sourceLocation: sourceLocation)
        return dead
    }

    @Test("every credential command writes one line, and every line is valid against docs/audit.schema.json")
    func everyCommandWritesOneValidLine() throws {
        let portal = try PortalHarness(backend: .file)
        try Self.runEveryCommand(
            portal, token: Self.canary("tok"), secondToken: Self.canary("tok"), password: Self.canary("pw"))
        let log = try Log(portal.git.environment)
        #expect(try Self.validate([log.rotatedPath, log.path]) == log.lines().count)
        // Files start private: the directory 0700, the log and its key 0600.
        for (path, mode) in [(log.directory, 0o700), (log.path, 0o600), (log.directory + "/audit.key", 0o600)] {
            var status = stat()
            #expect(stat(path, &status) == 0 && Int(status.st_mode & 0o777) == mode, "\(path)")
        }
        let token = log.entries.first { $0["operation"] as? String == "token" }
        #expect(token?["authEnvironmentId"] as? String == portal.environmentID)
        #expect(token?["endUserId"] as? String == "user-a")
        let caller = token?["caller"] as? [String: Any]
        #expect(caller?["uid"] as? Int == Int(getuid()))
        #expect(
            caller?["executable"] as? String
                == URL(fileURLWithPath: ProcessRunner.portalTokenPath).resolvingSymlinksInPath().path)
        #expect((caller?["parents"] as? [String])?.isEmpty == false, "the test runner started it")
        let exec = log.entries.first { $0["operation"] as? String == "exec" }
        #expect(exec?["program"] as? String == "sh" && exec?["exitCode"] == nil)
        let api = log.entries.first { $0["operation"] as? String == "api" }
        #expect(api?["httpStatus"] as? Int == 200 && api?["method"] as? String == "GET")
        let generic = log.entries.first { $0["host"] as? String == "git.example.com" }
        #expect(generic?["protocol"] as? String == "https" && generic?["authEnvironmentId"] == nil)
    }

    @Test("the log never holds a token, its base64, any 8 characters of it, a password or an email address")
    func canaries() throws {
        let harness = try SignInHarness(backend: .file)
        let token = Self.canary("tok"), second = Self.canary("tok"), password = Self.canary("pw")
        let others = try Self.runEveryCommand(
            harness.portal, token: token, secondToken: second, password: password)
        // A sign-in with an email address, and the token it brings.
        let login = try harness.start(["login", "--email", SignInTests.email])
        try login.waitForStderr(containing: "waiting for the browser")
        _ = try SimulatedBrowser.get(try #require(harness.auth.sentLinks.first).link)
        #expect(try login.finish().exitCode == 0)
        let issued = try #require(harness.auth.issuedTokens.first)
        // A second end user of the environment: chosen by name.
        #expect(try harness.run(["token", "--end-user", "end-user-1"]).exitCode == 0)

        let log = try Log(harness.environment)
        let everything = log.everything
        #expect(!everything.isEmpty)
        for secret in [token, second, password, issued] + others {
            var pieces = [secret, Data(secret.utf8).base64EncodedString()]
            let characters = Array(secret)
            for start in 0...(characters.count - 8) { pieces.append(String(characters[start..<(start + 8)])) }
            for piece in pieces { #expect(!everything.contains(piece), "the log holds '\(piece)'") }
        }
        #expect(!everything.lowercased().contains("new.user"), "the sign-in's email address")
        #expect(!everything.contains("team/repo"), "a credential's path")
        #expect(!everything.contains("\"ann\"") && !everything.contains("robot"), "a username")
        #expect(try Self.validate([log.rotatedPath, log.path]) == log.lines().count)
    }

    @Test("50 concurrent processes leave 50 intact lines")
    func concurrentWriters() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: Self.canary("tok")).exitCode == 0)
        let log = try Log(portal.git.environment)
        let before = log.lines().count
        try Self.runConcurrently(50, portal)
        let lines = log.lines()
        #expect(lines.count == before + 50)
        let pids = Set(
            lines.dropFirst(before).compactMap { line -> Int? in
                let entry = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
                #expect(entry?["operation"] as? String == "token", "\(line)")
                return (entry?["caller"] as? [String: Any])?["pid"] as? Int
            })
        #expect(pids.count == 50)
        #expect(try Self.validate([log.path]) == before + 50)
    }

    @Test("30 concurrent requests through the proxy, served on its threads, leave 30 intact lines")
    func concurrentProxiedRequests() throws {
        let (portal, _) = try ProxyTests.signedIn(Self.canary("tok"))
        let log = try Log(portal.git.environment)
        let before = log.lines().count
        let result = try ProxyTests.concurrentRequests(portal, count: 30)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout == String(repeating: "200\n", count: 30), "\(result.stdout)")
        let entries = Array(log.entries.dropFirst(before))
        #expect(entries.count == 31, "\(log.lines().dropFirst(before))")
        #expect(entries.first?["operation"] as? String == "exec")
        let proxied = entries.dropFirst()
        #expect(proxied.allSatisfy { $0["operation"] as? String == "proxy" && $0["outcome"] as? String == "served" })
        #expect(proxied.allSatisfy { $0["httpStatus"] as? Int == 200 && $0["method"] as? String == "GET" })
        #expect(Set(entries.map { $0["tokenFingerprint"] as? String }).count == 1)
        #expect(try Self.validate([log.path]) == before + 31)
    }

    /// `count` `portal-token token` processes started at once; each must succeed.
    static func runConcurrently(_ count: Int, _ portal: PortalHarness) throws {
        let scratch = try ScratchFolder("audit-concurrent")
        var pids: [pid_t] = []
        for index in 0..<count {
            pids.append(
                try ProcessRunner.spawn(
                    ProcessRunner.portalTokenPath, ["token"], environment: portal.git.environment,
                    stdout: scratch.path + "/out-\(index)", stderr: scratch.path + "/err-\(index)"))
        }
        for (index, pid) in pids.enumerated() {
            let status = ProcessRunner.wait(pid, timeout: 60)
            #expect(status == 0, "\(scratch.read("err-\(index)"))")
            #expect(scratch.read("err-\(index)").isEmpty)
        }
    }

    @Test("with concurrent writers the cap holds: the log rotates once and keeps every line")
    func rotationUnderConcurrency() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: Self.canary("tok")).exitCode == 0)
        let log = try Log(portal.git.environment)
        #expect(try portal.git.portalToken(["token"]).exitCode == 0)
        let lineLength = log.lines().last!.utf8.count + 1
        // Room for about two thirds of the lines: one rotation, and every line in one of the two files.
        let cap = max(4096, lineLength * 50 * 2 / 3)
        let config = try #require(portal.git.environment["XDG_CONFIG_HOME"]) + "/portal-token"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "audit-log-max-bytes = \(cap)\n".write(toFile: config + "/config", atomically: false, encoding: .utf8)
        try FileManager.default.removeItem(atPath: log.path)

        try Self.runConcurrently(50, portal)
        #expect(log.size(log.path) <= cap && log.size(log.rotatedPath) <= cap)
        #expect(log.size(log.rotatedPath) > cap - 2 * lineLength, "rotated when the next line would not fit")
        let kept = log.lines(log.rotatedPath) + log.lines()
        #expect(kept.count == 50)
        #expect(try Self.validate([log.rotatedPath, log.path]) == 50)
        #expect(try portal.git.portalToken(["audit", "--format", "json"]).stdout.split(separator: "\n").count == 50)
    }

    struct Outcome {
        let exitCode: Int32
        let stdout: String
        let stderr: String
    }

    /// What `token`, a failing `exec` and a command with no session exit with.
    static func exitCodes(_ portal: PortalHarness, _ environment: [String: String]) throws -> [Outcome] {
        var other = environment
        other["PORTAL_AUTH_ENVIRONMENT_ID"] = "env-nobody"
        return [
            try ProcessRunner.portalToken(["token"], environment: environment),
            try ProcessRunner.portalToken(["exec", "--", "/bin/sh", "-c", "exit 7"], environment: environment),
            try ProcessRunner.portalToken(["token"], environment: other),
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=nothing.example\n", environment: other),
        ].map { Outcome(exitCode: $0.exitCode, stdout: $0.stdout, stderr: $0.stderr) }
    }

    @Test(
        """
        a log that cannot be written (a directory or a FIFO at its name, a directory others may write, a read-only \
        file system) changes no exit code and warns once
        """,
        arguments: ["directory", "fifo", "open-directory", "read-only"])
    func unwritableLog(kind: String) throws {
        let portal = try PortalHarness(backend: .file)
        let token = Self.canary("tok")
        #expect(try portal.adopt(token: token).exitCode == 0)
        let expected = try Self.exitCodes(portal, portal.git.environment)
        #expect(expected.map(\.exitCode) == [0, 7, 1, 0])
        #expect(expected.allSatisfy { $0.stderr.isEmpty || $0.stderr.hasPrefix("portal-token: error: not signed") })

        let scratch = try ScratchFolder("audit-broken")
        var environment = portal.git.environment
        let state = scratch.path + "/state"
        let directory = state + "/portal-token"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        environment["XDG_STATE_HOME"] = state
        // The session lock in a runtime directory of its own, so only the log is affected.
        let runtime = scratch.path + "/run"
        #expect(mkdir(runtime, 0o700) == 0)
        environment["XDG_RUNTIME_DIR"] = runtime
        var results: [Outcome]
        switch kind {
        case "directory":
            try FileManager.default.createDirectory(
                atPath: directory + "/audit.jsonl", withIntermediateDirectories: true)
            results = try Self.exitCodes(portal, environment)
        case "fifo":
            #expect(mkfifo(directory + "/audit.jsonl", 0o600) == 0)
            results = try Self.exitCodes(portal, environment)
        case "open-directory":
            chmod(directory, 0o777)
            results = try Self.exitCodes(portal, environment)
        default:
            // Read-only for root too: the directory bind-mounted read-only in a mount namespace of its own.
            let script = """
                mount --bind "$STATE" "$STATE" && mount -o remount,bind,ro "$STATE" || exit 90
                for step in 1 2 3 4; do
                    case $step in
                    1) "$BIN" token;;
                    2) "$BIN" exec -- /bin/sh -c 'exit 7';;
                    3) PORTAL_AUTH_ENVIRONMENT_ID=env-nobody "$BIN" token;;
                    4) printf 'protocol=https\\nhost=nothing.example\\n' |
                       PORTAL_AUTH_ENVIRONMENT_ID=env-nobody "$BIN" get;;
                    esac > "$OUT/out-$step" 2> "$OUT/err-$step"
                    echo "$step=$?"
                done
                """
            environment["STATE"] = directory
            environment["BIN"] = ProcessRunner.portalTokenPath
            environment["OUT"] = scratch.path
            let run = try ProcessRunner.run("/usr/bin/unshare", ["-m", "sh", "-c", script], environment: environment)
            #expect(run.stdout == "1=0\n2=7\n3=1\n4=0\n", "\(run.stderr)")
            results = (1...4).map { step in
                Outcome(
                    exitCode: Int32(run.stdout.split(separator: "\n")[step - 1].split(separator: "=")[1]) ?? -1,
                    stdout: scratch.read("out-\(step)"), stderr: scratch.read("err-\(step)"))
            }
        }
        #expect(results.map(\.exitCode) == expected.map(\.exitCode))
        #expect(results.map(\.stdout) == expected.map(\.stdout))
        for result in results {
            let warnings = result.stderr.components(separatedBy: "portal-token: warning: cannot write the audit log")
            #expect(warnings.count == 2, "one warning: \(result.stderr)")
            #expect(!result.stderr.contains(token))
        }
        #expect(results[0].stderr.contains("hint: "), "\(results[0].stderr)")
    }

    @Test("the fingerprint is the same for every use of one token and changes with a new sign-in")
    func fingerprintFollowsTheSession() throws {
        let harness = try SignInHarness(backend: .file)
        func signIn() throws {
            let login = try harness.start(["login", "--email", SignInTests.email])
            try login.waitForStderr(containing: "waiting for the browser")
            _ = try SimulatedBrowser.get(try #require(harness.auth.sentLinks.last).link)
            #expect(try login.finish().exitCode == 0)
        }
        try signIn()
        for _ in 0..<3 { #expect(try harness.run(["token"]).exitCode == 0) }
        try signIn()
        #expect(try harness.run(["token"]).exitCode == 0)
        #expect(harness.auth.issuedTokens.count == 2)

        let entries = try Log(harness.environment).entries
        #expect(entries.map { $0["operation"] as? String } == ["login", "token", "token", "token", "login", "token"])
        #expect(entries.first?["outcome"] as? String == "signed-in")
        let prints = entries.map { $0["tokenFingerprint"] as? String }
        #expect(prints.allSatisfy { $0?.count == 16 })
        #expect(Set(prints[0...3]).count == 1, "one token, one fingerprint: \(prints)")
        #expect(Set(prints[4...5]).count == 1)
        #expect(prints[0] != prints[4], "a new sign-in, a new fingerprint")
        let log = try Log(harness.environment)
        #expect(try Self.validate([log.path]) == 6)
    }

    @Test("only the user's own config file turns the log off: not --config, PORTAL_TOKEN_CONFIG or a variable")
    func turningItOff() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: Self.canary("tok")).exitCode == 0)
        let log = try Log(portal.git.environment)
        let scratch = try ScratchFolder("audit-config")
        try scratch.write("other-config", "audit-log = off\n")
        let other = scratch.path + "/other-config"
        var environment = portal.git.environment
        environment["PORTAL_TOKEN_CONFIG"] = other
        var count = log.lines().count
        #expect(try ProcessRunner.portalToken(["token"], environment: environment).exitCode == 0)
        #expect(try portal.git.portalToken(["--config", other, "token"]).exitCode == 0)
        #expect(log.lines().count == count + 2)

        let config = try #require(portal.git.environment["XDG_CONFIG_HOME"]) + "/portal-token"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "audit-log = off\n".write(toFile: config + "/config", atomically: false, encoding: .utf8)
        count = log.lines().count
        #expect(try portal.git.portalToken(["token"]).exitCode == 0)
        #expect(try portal.git.portalToken(["--config", other, "token"]).exitCode == 0)
        #expect(log.lines().count == count)
        // What was written stays readable.
        #expect(try portal.git.portalToken(["audit", "--format", "json"]).stdout.split(separator: "\n").count == count)
    }

    @Test("audit-journal = on sends each line to the journal as well (a journal socket of the test's own)")
    func journalCopy() throws {
        let portal = try PortalHarness(backend: .file)
        let token = Self.canary("tok")
        #expect(try portal.adopt(token: token).exitCode == 0)
        let config = try #require(portal.git.environment["XDG_CONFIG_HOME"]) + "/portal-token"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "audit-journal = on\n".write(toFile: config + "/config", atomically: false, encoding: .utf8)
        let scratch = try ScratchFolder("audit-journal")
        // In a mount namespace of its own, an empty /run/systemd with a socket where journald's
        // would be; a listener keeps the one datagram portal-token sends.
        let listener = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind("/run/systemd/journal/socket")
            open(sys.argv[1] + "/ready", "w").close()
            s.settimeout(20)
            open(sys.argv[1] + "/entry", "wb").write(s.recv(65536))
            """
        let script = """
            mount -t tmpfs -o mode=0755 tmpfs /run/systemd || exit 90
            mkdir /run/systemd/journal
            /usr/bin/python3 -c "$LISTENER" "$OUT" &
            listener=$!
            while [ ! -e "$OUT/ready" ]; do sleep 0.05; done
            "$BIN" token > "$OUT/token"
            echo "token=$?"
            wait $listener
            """
        var environment = portal.git.environment
        environment["LISTENER"] = listener
        environment["OUT"] = scratch.path
        environment["BIN"] = ProcessRunner.portalTokenPath
        let run = try ProcessRunner.run("/usr/bin/unshare", ["-m", "sh", "-c", script], environment: environment)
        #expect(run.stdout == "token=0\n", "\(run.stderr)")
        let entry = scratch.read("entry")
        let fields = entry.split(separator: "\n").map(String.init)
        #expect(fields.contains("SYSLOG_IDENTIFIER=portal-token") && fields.contains("PORTAL_TOKEN_AUDIT=1"))
        let message = try #require(fields.first { $0.hasPrefix("MESSAGE=") }?.dropFirst("MESSAGE=".count))
        let logged = try #require(try Log(portal.git.environment).lines().last)
        #expect(String(message) == logged, "the journal gets the line the file got")
        #expect(!entry.contains(token))
    }
}
