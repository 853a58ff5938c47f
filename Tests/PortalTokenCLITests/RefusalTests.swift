import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// Refused callers against the real agent and the real proxy (docs/agent.md and docs/proxy.md,
/// "Connections"; docs/audit.md, "Refusals"): a refusal ends its connection, refused callers
/// holding connections do not delay an admitted one, and a flood of refusals leaves the served
/// lines in the audit log. The refused clients are python3 in a sandbox (`unshare -Urpf`) or
/// run as another uid (`setpriv`).
@Suite("refused callers", .serialized)
struct RefusalTests {
    /// A raw client: ADDRESS is a Unix socket's path or 127.0.0.1:PORT.
    /// - `twice ADDRESS REQUEST`: sends REQUEST twice on one connection, prints how many answers
    ///   came and whether the server closed within 3 s.
    /// - `hold ADDRESS COUNT SECONDS [HEAD]`: opens COUNT connections, each with half a request
    ///   head (or HEAD, whose body it then holds back), says `ready` on stderr, and holds them for
    ///   SECONDS.
    /// - `flood ADDRESS REQUEST COUNT SECONDS`: sends REQUEST on COUNT connections, one each,
    ///   from up to 4 processes at once, each read to the close; stops after SECONDS; prints how many
    ///   were answered.
    static let client = #"""
        import os, socket, sys, time
        mode, address = sys.argv[1], sys.argv[2]
        def connect(worker=0):
            if address.startswith("/"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(address)
            else:
                host, port = address.rsplit(":", 1)
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.%d" % (2 + worker), 0))
                s.connect((host, int(port)))
            return s
        def request(text):
            return text.replace("\\r\\n", "\r\n").encode()
        if mode == "twice":
            s = connect()
            s.sendall(request(sys.argv[3]) * 2)
            s.settimeout(3)
            data, closed = b"", False
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    data += chunk
            except socket.timeout:
                pass
            print("answers=%d closed=%s" % (data.count(b"HTTP/1.1 "), closed))
            print(data.decode(errors="replace"))
        elif mode == "hold":
            held = []
            for i in range(int(sys.argv[3])):
                s = connect()
                s.sendall(request(sys.argv[5]) if len(sys.argv) > 5 else b"GET /v1/token HTTP/1.1\r\n")
                held.append(s)
            sys.stderr.write("ready %d\n" % len(held))
            sys.stderr.flush()
            time.sleep(float(sys.argv[4]))
        elif mode == "flood":
            data, total, seconds = request(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
            workers, pids, start = min(4, total), [], time.monotonic()
            for worker in range(workers):
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    answered = 0
                    while answered < total // workers + (worker < total % workers):
                        if time.monotonic() - start > seconds:
                            break
                        try:
                            s = connect(worker)
                            s.sendall(data)
                            s.settimeout(5)
                            got = b""
                            while True:
                                chunk = s.recv(65536)
                                if not chunk:
                                    break
                                got += chunk
                            s.close()
                            if got.startswith(b"HTTP/1.1 4"):
                                answered += 1
                        except OSError:
                            pass
                    os.write(w, str(answered).encode())
                    os._exit(0)
                os.close(w)
                pids.append((pid, r))
            answered = 0
            for pid, r in pids:
                answered += int(os.read(r, 64) or b"0")
                os.waitpid(pid, 0)
            print("answered=%d seconds=%.1f" % (answered, time.monotonic() - start))
        """#

    static func python(_ arguments: [String]) -> [String] { ["/usr/bin/python3", "-c", client] + arguments }

    /// A command as uid 65534, with no groups.
    static func otherUID(_ command: [String]) -> [String] {
        ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
    }

    /// Lets uid 65534 reach the agent's sockets, as a socket bound into a container would be.
    static func openSockets(_ harness: AgentHarness) {
        chmod(harness.scratch, 0o755)
        chmod(harness.runtime, 0o755)
        chmod(harness.runtime + "/portal-token", 0o755)
        chmod(harness.socket, 0o666)
        chmod(harness.restrictedSocket, 0o666)
    }

    /// `portal-token proxy --listen 127.0.0.1:0`, with its port and credential.
    final class LoopbackProxy {
        let process: RunningProcess
        let port: String
        let credential: String

        init(_ environment: [String: String]) throws {
            process = try RunningProcess(
                ProcessRunner.portalTokenPath, ["proxy", "--listen", "127.0.0.1:0"], environment: environment)
            var waited = 0
            while !process.stdout.contains("PORTAL_TOKEN_PROXY_CREDENTIAL="), waited < 200 {
                usleep(50_000)
                waited += 1
            }
            let printed = process.stdout
            func value(_ name: String) -> String {
                printed.split(separator: "\n").first { $0.hasPrefix(name + "=") }.map {
                    String($0.dropFirst(name.count + 1))
                } ?? ""
            }
            port = String(value("PORTAL_API_HOST").split(separator: ":").last ?? "")
            credential = value("PORTAL_TOKEN_PROXY_CREDENTIAL")
        }

        deinit {
            process.signal(SIGTERM)
            _ = try? process.finish(timeout: 10)
        }

        var address: String { "127.0.0.1:\(port)" }

        /// A request the proxy serves, by curl: its status and how long it took.
        func served() throws -> (status: String, seconds: Double) {
            let result = try ProcessRunner.run(
                "/usr/bin/curl",
                [
                    "-sS", "--noproxy", "*", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                    "Portal-Token-Proxy: \(credential)", "-H", "Accept: application/json", "-H",
                    "Content-Type: application/json",
                    "http://\(address)/api/v3/clients/me",
                ])
            return (result.stdout, result.duration)
        }
    }

    /// The token request a refused caller sends; `close` asks for the connection's end.
    static func tokenRequest(close: Bool = false) -> String {
        "GET /v1/token HTTP/1.1\\r\\nHost: localhost\\r\\n" + (close ? "Connection: close\\r\\n" : "") + "\\r\\n"
    }

    @Test("a refusal by the agent ends the connection, on either socket")
    func agentRefusalCloses() throws {
        let harness = try AgentHarness()
        try harness.signIn()
        for socket in [harness.socket, harness.restrictedSocket] {
            let result = try harness.sandboxed(Self.python(["twice", socket, Self.tokenRequest()]))
            #expect(result.stdout.hasPrefix("answers=1 closed=True\n"), "\(socket): \(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("HTTP/1.1 403 Forbidden\r\n"))
            #expect(result.stdout.contains("Connection: close\r\n"))
        }
        // An admitted caller keeps its connection.
        let own = try ProcessRunner.run(
            "/usr/bin/python3", ["-c", Self.client, "twice", harness.socket, Self.tokenRequest()])
        #expect(own.stdout.hasPrefix("answers=2 closed=False\n"), "\(own.stdout) \(own.stderr)")
    }

    @Test("a refusal by the loopback proxy ends the connection: Host, marker, credential, method, path")
    func proxyRefusalCloses() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let proxy = try LoopbackProxy(portal.git.environment)
        let host = "Host: \(proxy.address)\\r\\n"
        let marker = "Portal-Token-Proxy: \(proxy.credential)\\r\\n"
        let requests = [
            "GET /api/v3/clients/me HTTP/1.1\\r\\nHost: elsewhere.example\\r\\n\(marker)\\r\\n",
            "GET /api/v3/clients/me HTTP/1.1\\r\\n\(host)\\r\\n",
            "GET /api/v3/clients/me HTTP/1.1\\r\\n\(host)Portal-Token-Proxy: wrong\\r\\n\\r\\n",
            "TRACE /api/v3/clients/me HTTP/1.1\\r\\n\(host)\(marker)\\r\\n",
            "GET /api/v3/auth/methods HTTP/1.1\\r\\n\(host)\(marker)\\r\\n",
        ]
        for request in requests {
            let result = try ProcessRunner.run(
                "/usr/bin/python3", ["-c", Self.client, "twice", proxy.address, request])
            #expect(result.stdout.hasPrefix("answers=1 closed=True\n"), "\(request): \(result.stdout) \(result.stderr)")
        }
        // exec --proxy's proxy too, from its child.
        let script =
            #"/usr/bin/python3 -c "$1" twice "$PORTAL_API_HOST" 'GET /api/v3/clients/me HTTP/1.1\r\nHost: x\r\n\r\n'"#
        let exec = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["exec", "--proxy", "--", "sh", "-c", script, "sh", Self.client],
            environment: portal.git.environment)
        #expect(exec.stdout.hasPrefix("answers=1 closed=True\n"), "\(exec.stdout) \(exec.stderr)")
        // A request it serves keeps the connection.
        let served = "GET /api/v3/clients/me HTTP/1.1\\r\\n\(host)\(marker)\\r\\n"
        let kept = try ProcessRunner.run("/usr/bin/python3", ["-c", Self.client, "twice", proxy.address, served])
        #expect(kept.stdout.hasPrefix("answers=2 closed=False\n"), "\(kept.stdout) \(kept.stderr)")
    }

    /// The host user's token request on the main socket: answered, with the token, within 1 s.
    static func expectServedWithinASecond(
        _ harness: AgentHarness, token: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let started = ProcessRunner.monotonicSeconds()
        let answer = rawExchange(
            harness.socket, Array("GET /v1/token HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8),
            timeout: 10)
        let seconds = ProcessRunner.monotonicSeconds() - started
        #expect(statusCode(answer) == 200, "\(answer ?? "no answer")", sourceLocation: sourceLocation)
        #expect(answer?.contains(token) == true, sourceLocation: sourceLocation)
        #expect(seconds < 1, "the host user waited \(seconds) s", sourceLocation: sourceLocation)
    }

    @Test("300 connections held open by a refused sandbox on each socket do not delay the host user beyond 1 s")
    func agentSlotsHeldBySandbox() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        var holders: [RunningProcess] = []
        defer { for holder in holders { holder.signal(SIGKILL) } }
        for socket in [harness.restrictedSocket, harness.socket] {
            let holder = try RunningProcess(
                "/usr/bin/unshare", ["-Urpf", "--mount-proc"] + Self.python(["hold", socket, "300", "4"]),
                environment: harness.clientEnvironment())
            holders.append(holder)
            _ = try holder.waitForStderr(containing: "ready 300", timeout: 20)
        }
        Self.expectServedWithinASecond(harness, token: token)
        // Client-mode token too.
        let client = try harness.client(["token"])
        #expect(client.exitCode == 0 && client.stdout == token + "\n", "\(client.stderr)")
        #expect(client.duration < 2, "client-mode token took \(client.duration) s")
    }

    @Test("300 requests of a refused sandbox whose bodies are held back do not delay the host user beyond 1 s")
    func agentSlotsHeldByBodies() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        // The agent reads a git request's body before it judges it.
        let head = "POST /v1/git/get HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 1000\\r\\n\\r\\n"
        let holder = try RunningProcess(
            "/usr/bin/unshare", ["-Urpf", "--mount-proc"] + Self.python(["hold", harness.socket, "300", "4", head]),
            environment: harness.clientEnvironment())
        defer { holder.signal(SIGKILL) }
        _ = try holder.waitForStderr(containing: "ready 300", timeout: 20)
        usleep(300_000)
        Self.expectServedWithinASecond(harness, token: token)
    }

    @Test("300 connections held open by another uid on the agent's main socket do not delay the host user beyond 1 s")
    func agentSlotsHeldByOtherUID() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        Self.openSockets(harness)
        let holder = try RunningProcess(
            "/usr/bin/setpriv", Array(Self.otherUID(Self.python(["hold", harness.socket, "300", "4"])).dropFirst()),
            environment: ["PATH": "/usr/bin:/bin"])
        defer { holder.signal(SIGKILL) }
        _ = try holder.waitForStderr(containing: "ready 300", timeout: 20)
        Self.expectServedWithinASecond(harness, token: token)
        // The other uid is refused, and its refusal ends the connection.
        let refused = try ProcessRunner.run(
            "/usr/bin/setpriv",
            Array(Self.otherUID(Self.python(["twice", harness.socket, Self.tokenRequest()])).dropFirst()),
            environment: ["PATH": "/usr/bin:/bin"])
        #expect(refused.stdout.hasPrefix("answers=1 closed=True\n"), "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stdout.contains("HTTP/1.1 403 Forbidden\r\n"))
    }

    @Test("300 connections held open by another uid on the loopback proxy do not delay its user beyond 1 s")
    func proxySlotsHeldByOtherUID() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let proxy = try LoopbackProxy(portal.git.environment)
        let holder = try RunningProcess(
            "/usr/bin/setpriv",
            Array(Self.otherUID(Self.python(["hold", proxy.address, "300", "4"])).dropFirst()),
            environment: ["PATH": "/usr/bin:/bin"])
        defer { holder.signal(SIGKILL) }
        _ = try holder.waitForStderr(containing: "ready 300", timeout: 20)
        let (status, seconds) = try proxy.served()
        #expect(status == "200")
        #expect(seconds < 1, "the proxy's user waited \(seconds) s")
    }

    /// Sets the audit log's cap in the harness's own config file.
    static func capAuditLog(_ environment: [String: String], bytes: Int) throws {
        let config = try #require(environment["XDG_CONFIG_HOME"]) + "/portal-token"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "audit-log-max-bytes = \(bytes)\n".write(toFile: config + "/config", atomically: false, encoding: .utf8)
    }

    /// The log's lines with the given operation and outcome.
    static func lines(_ log: AuditLogTests.Log, _ operation: String, _ outcome: String) -> [[String: Any]] {
        let all = (log.lines(log.rotatedPath) + log.lines()).map {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] ?? [:]
        }
        return all.filter { $0["operation"] as? String == operation && $0["outcome"] as? String == outcome }
    }

    /// Sends one more refusal from a sandbox each second, until a refusal line has been written
    /// after `lines` of them (the throttle's next token): how many it sent.
    static func refuseUntilWritten(_ harness: AgentHarness, _ log: AuditLogTests.Log, after lines: Int) throws -> Int {
        var sent = 0
        while Self.lines(log, "token", "refused").count == lines, sent < 10 {
            let result = try harness.sandboxed(
                Self.python(["flood", harness.socket, Self.tokenRequest(close: true), "1", "5"]))
            #expect(result.stdout.hasPrefix("answered=1 "), "\(result.stdout) \(result.stderr)")
            sent += 1
            if Self.lines(log, "token", "refused").count == lines { sleep(1) }
        }
        return sent
    }

    @Test("100,000 refusals of a sandbox by the agent leave every served line in the audit log, each one counted")
    func agentRefusalsKeepServedLines() throws {
        let harness = try AgentHarness(start: false)
        try Self.capAuditLog(harness.portal.git.environment, bytes: 1 << 20)
        try harness.start()
        try harness.signIn()
        let log = try AuditLogTests.Log(harness.portal.git.environment)
        for _ in 0..<3 { #expect(try harness.client(["token"]).exitCode == 0) }
        #expect(Self.lines(log, "token", "served").count == 3)
        // Each refusal ends its connection, so each is a connection of its own, from 4 processes.
        let flood = try harness.sandboxed(
            Self.python(["flood", harness.socket, Self.tokenRequest(close: true), "100000", "85"]), timeout: 90)
        #expect(flood.stdout.hasPrefix("answered=100000 "), "\(flood.stdout) \(flood.stderr)")
        #expect(try harness.client(["token"]).exitCode == 0)
        #expect(Self.lines(log, "token", "served").count == 4, "the served lines were pushed out")
        // The refusals after the last line are counted on the next line written.
        let written = Self.lines(log, "token", "refused").count
        let more = try Self.refuseUntilWritten(harness, log, after: written)
        let refused = Self.lines(log, "token", "refused")
        #expect(refused.count > written && refused.count < 200, "\(refused.count) refusal lines")
        let counted = refused.compactMap { $0["unwrittenRefusals"] as? Int }.reduce(0, +)
        #expect(counted + refused.count == 100_000 + more, "\(refused.count) lines, \(counted) counted")
        #expect(try AuditLogTests.validate([log.rotatedPath, log.path]) > 0)
        #expect(harness.log.split(separator: "\n").count(where: { $0.contains("refused") }) == refused.count)
    }

    @Test("100,000 refusals of another uid by the loopback proxy leave every served line in the audit log")
    func proxyRefusalsKeepServedLines() throws {
        let (portal, _) = try ProxyTests.signedIn()
        try Self.capAuditLog(portal.git.environment, bytes: 1 << 20)
        let log = try AuditLogTests.Log(portal.git.environment)
        let proxy = try LoopbackProxy(portal.git.environment)
        for _ in 0..<3 { #expect(try proxy.served().status == "200") }
        #expect(Self.lines(log, "proxy", "served").count == 3)
        // No marker: any local process can send it.
        let request = "GET /api/v3/clients/me HTTP/1.1\\r\\nHost: \(proxy.address)\\r\\nConnection: close\\r\\n\\r\\n"
        let flood = try ProcessRunner.run(
            "/usr/bin/setpriv",
            Array(Self.otherUID(Self.python(["flood", proxy.address, request, "100000", "85"])).dropFirst()),
            environment: ["PATH": "/usr/bin:/bin"], timeout: 90)
        #expect(flood.stdout.hasPrefix("answered=100000 "), "\(flood.stdout) \(flood.stderr)")
        #expect(Self.lines(log, "proxy", "served").count == 3, "the served lines were pushed out")
        let refused = Self.lines(log, "proxy", "refused")
        #expect(!refused.isEmpty && refused.count < 10, "\(refused.count) refusal lines")
        #expect(try AuditLogTests.validate([log.rotatedPath, log.path]) > 0)
    }
}
