import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The Portal API proxied by the agent and by `portal-token proxy --socket`, callers judged by the
/// agent's rules file: the real binary, real curl over the Unix socket, clients in real user
/// namespaces (unshare), and the fake Portal upstream.
@Suite("the Portal API through the agent's sockets", .serialized)
struct AgentProxyTests {
    /// curl's answer to a request on a Unix socket: the head (-i), then the body, then the status.
    static func curlArguments(_ socket: String, _ path: String = "/api/v3/clients/me") -> [String] {
        [
            "/usr/bin/curl", "-sS", "-i", "--noproxy", "*", "--max-time", "30", "--unix-socket", socket,
            "-H", "Accept: application/json", "-H", "Content-Type: application/json", "-w", "\nstatus=%{http_code}\n",
            "http://localhost" + path,
        ]
    }

    static func curl(_ socket: String, _ path: String = "/api/v3/clients/me") throws -> ProcessResult {
        let arguments = curlArguments(socket, path)
        return try ProcessRunner.run(arguments[0], Array(arguments.dropFirst()))
    }

    @Test("the agent proxies the client API for its own user, adding the bearer upstream")
    func servedForOwnUser() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let result = try Self.curl(harness.socket)
        #expect(result.stdout.contains("status=200"), "\(result.stdout) \(result.stderr) \(harness.log)")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])
        #expect(!result.stdout.contains(token))
        // Another path is not a client API path: refused by the default, with no upstream request.
        let other = try Self.curl(harness.socket, "/api/v3/admin/users")
        #expect(other.stdout.contains("status=403"), "\(other.stdout)")
        #expect(other.stdout.lowercased().contains("portal-token-decided-by: default"))
        #expect(harness.portal.requests(to: "/api/v3/admin/users").isEmpty)
        // The agent's own endpoints still answer beside the proxy.
        let status = try ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-sS", "--unix-socket", harness.socket, "-w", "\nstatus=%{http_code}\n",
                "http://localhost/v1/status",
            ])
        #expect(status.stdout.contains("status=200"), "\(status.stdout)")
    }

    @Test(
        "another user namespace is refused by default with no upstream request, and served by a rule naming it"
    )
    func namespacedClient() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let refused = try harness.sandboxed(Self.curlArguments(harness.socket))
        #expect(refused.stdout.contains("status=403"), "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stdout.lowercased().contains("portal-token-decided-by: default"))
        #expect(refused.stdout.contains("the caller is in another user namespace"))
        #expect(harness.portal.requests(to: "/api/v3/clients/me").isEmpty)
        #expect(harness.log.contains("refused proxying GET /api/v3/clients/me on the main socket for uid \(getuid())"))

        harness.stop()
        try harness.write(rules: "rule sandboxes\n    user-namespace other\n    allow proxy GET /api/v3/clients/me\n")
        try harness.start()
        let served = try harness.sandboxed(Self.curlArguments(harness.socket))
        #expect(served.stdout.contains("status=200"), "\(served.stdout) \(served.stderr) \(harness.log)")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])
        // The rule grants GET only.
        let arguments = Self.curlArguments(harness.socket) + ["-X", "DELETE"]
        let delete = try harness.sandboxed(arguments)
        #expect(delete.stdout.contains("status=403"), "\(delete.stdout)")
        #expect(delete.stdout.lowercased().contains("portal-token-decided-by: rule sandboxes"))
        #expect(harness.portal.requests(to: "/api/v3/clients/me").count == 1)
    }

    @Test("the restricted socket proxies only for a caller a rule names")
    func restrictedSocket() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let refused = try Self.curl(harness.restrictedSocket)
        #expect(refused.stdout.contains("status=403"), "\(refused.stdout)")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").isEmpty)
        harness.stop()
        try harness.write(rules: "rule forwarded\n    socket restricted\n    uid \(getuid())\n    allow proxy\n")
        try harness.start()
        let served = try Self.curl(harness.restrictedSocket)
        #expect(served.stdout.contains("status=200"), "\(served.stdout) \(harness.log)")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])
    }

    @Test("8 MB go up chunked and come down chunked intact, streamed through the agent")
    func largeBodies() throws {
        let harness = try AgentHarness()
        harness.portal.server.enableLargeBodies()
        try harness.signIn()
        let size = 8 * 1024 * 1024
        let upload = harness.scratch + "/up"
        let uploadDigest = try FakePortalServer.writeRandomUpload(count: size, to: upload)
        let curl =
            "curl -sS --noproxy '*' --max-time 120 --unix-socket '\(harness.socket)' "
            + "-H 'Accept: application/json' -H 'Content-Type: application/json'"
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c",
                """
                \(curl) -w '\\nup=%{http_code}\\n' -H 'Transfer-Encoding: chunked' -X POST -T '\(upload)' \\
                    'http://localhost\(FakePortalServer.uploadPath)'
                \(curl) -o '\(harness.scratch)/down' -D '\(harness.scratch)/down-head' -w 'down=%{http_code}\\n' \\
                    'http://localhost\(FakePortalServer.downloadPath)?bytes=\(size)'
                grep -i '^Transfer-Encoding: chunked' '\(harness.scratch)/down-head' >/dev/null && echo down-chunked
                sha256sum '\(harness.scratch)/down'
                """,
            ], timeout: 300)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.contains("up=200") && result.stdout.contains("down=200"), "\(result.stdout)")
        #expect(result.stdout.contains(#""bytes":\#(size),"sha256":"\#(uploadDigest)","chunked":true"#))
        #expect(result.stdout.contains("down-chunked"))
        #expect(result.stdout.contains(FakePortalServer.downloadDigest(count: size) + "  "))
        #expect(harness.portal.server.violations.isEmpty, "\(harness.portal.server.violations)")
    }

    @Test("concurrent 401s proxied by the agent end the session once, and each is passed back")
    func unauthorizedEndsTheSessionOnce() throws {
        let harness = try AgentHarness()
        try harness.signIn()
        harness.portal.server.addRoute("GET", "/api/v3/clients/me", bearer: .required) { _, _ in
            .json(401, #"{"error":"Unauthorized"}"#)
        }
        let statuses = try concurrently(6) { () -> String in
            let result = try Self.curl(harness.socket)
            return result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        }
        #expect(statuses.allSatisfy { $0 == "status=401" }, "\(statuses)")
        // The hook runs once the client has its whole answer.
        let deadline = Date().addingTimeInterval(20)
        while harness.portal.hookRuns.isEmpty, Date() < deadline { usleep(50_000) }
        usleep(500_000)
        #expect(
            harness.portal.hookRuns.filter { !$0.hasPrefix("hook read stdin") }.count == 1, "\(harness.portal.hookRuns)"
        )
        #expect(try harness.client(["token"]).exitCode == 1)
    }

    @Test("where the kernel refuses keyrings to the agent, its proxy keeps the file's key in the agent's memory")
    func keysInMemory() throws {
        let harness = try AgentHarness(start: false)
        let token = try harness.signIn()
        let passphraseFile = try harness.startWithoutKeyrings()
        let first = try Self.curl(harness.socket)
        #expect(first.stdout.contains("status=200"), "\(first.stdout) \(harness.log)")
        // With the passphrase gone and no kernel keyring, only the agent's memory can answer.
        unlink(passphraseFile)
        let second = try Self.curl(harness.socket)
        #expect(second.stdout.contains("status=200"), "\(second.stdout) \(harness.log)")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token, token])
    }

    @Test(
        "each request proxied or refused through the agent writes one audit line naming the caller the kernel reports")
    func auditLines() throws {
        let harness = try AgentHarness(start: false)
        let state = harness.scratch + "/state"
        try harness.start(environmentChanges: ["XDG_STATE_HOME": state])
        let token = try harness.signIn()
        #expect(try Self.curl(harness.socket).stdout.contains("status=200"))
        #expect(try harness.sandboxed(Self.curlArguments(harness.socket)).stdout.contains("status=403"))
        let log = state + "/portal-token/audit.jsonl"
        // A served request's line is written once its session is settled, after the client has
        // its answer: it is waited for (5 s at most).
        var text = ""
        let deadline = Date().addingTimeInterval(5)
        repeat {
            text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text.split(separator: "\n").count >= 2 { break }
            usleep(20_000)
        } while Date() < deadline
        #expect(!text.contains(token))
        #expect(try AuditLogTests.validate([log]) == text.split(separator: "\n").count)
        let lines = try text.split(separator: "\n").map { try JSONValue.parse(String($0)) }
            .filter { $0["operation"]?.stringValue == "proxy" }
        #expect(lines.count == 2, "\(text)")
        guard lines.count == 2 else { return }
        let ownNamespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/user")
        let agentPID = try #require(harness.agent?.pid)
        // So the two lines may come in either order.
        let served = try #require(lines.first { $0["outcome"]?.stringValue == "served" }, "\(text)")
        let refused = try #require(lines.first { $0["outcome"]?.stringValue == "refused" }, "\(text)")
        #expect(served["httpStatus"]?.int64Value == 200)
        #expect(served["tokenFingerprint"]?.stringValue?.count == 16)
        #expect(refused["httpStatus"]?.int64Value == 403)
        #expect(refused["tokenFingerprint"] == nil)
        for line in lines {
            let caller = try #require(line["caller"])
            #expect(caller["uid"]?.int64Value == Int64(getuid()))
            #expect(caller["pid"]?.int64Value.map { $0 > 1 && $0 != Int64(agentPID) } == true, "\(line)")
            #expect(caller["socket"]?.stringValue == "main")
            #expect(caller["executable"]?.stringValue?.hasSuffix("/curl") == true, "\(line)")
        }
        #expect(served["caller"]?["userNamespace"]?.int64Value.map { "user:[\($0)]" } == ownNamespace)
        let other = refused["caller"]?["userNamespace"]?.int64Value
        #expect(other != nil && other.map { "user:[\($0)]" } != ownNamespace, "\(refused)")
    }

    @Test("portal-token proxy --socket judges its callers by the agent's rules file")
    func proxyCommandUsesTheRules() throws {
        let harness = try AgentHarness(start: false)
        let token = try harness.signIn()
        let config = harness.scratch + "/config"
        mkdir(config, 0o700)
        mkdir(config + "/portal-token", 0o700)
        let socket = harness.runtime + "/proxy.sock"
        var environment = try harness.agentEnvironment()
        environment["XDG_CONFIG_HOME"] = config
        func serve(_ check: () throws -> Void) throws {
            let proxy = try RunningProcess(
                ProcessRunner.portalTokenPath, ["proxy", "--socket", socket], environment: environment)
            defer {
                proxy.signal(SIGTERM)
                _ = try? proxy.finish(timeout: 10)
            }
            try proxy.waitForStderr(containing: "proxy listening on")
            try check()
        }
        try serve {
            let own = try Self.curl(socket)
            #expect(own.stdout.contains("status=200"), "\(own.stdout)")
            let refused = try harness.sandboxed(Self.curlArguments(socket))
            #expect(refused.stdout.contains("status=403"), "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stdout.lowercased().contains("portal-token-decided-by: default"))
        }
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])
        let rules = config + "/portal-token/agent.rules"
        try "rule sandboxes\n    user-namespace other\n    allow proxy\n".write(
            toFile: rules, atomically: false, encoding: .utf8)
        chmod(rules, 0o600)
        try serve {
            let served = try harness.sandboxed(Self.curlArguments(socket))
            #expect(served.stdout.contains("status=200"), "\(served.stdout) \(served.stderr)")
        }
        #expect(harness.portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token, token])
    }
}
