import AgentClient
import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// `portal-token agent` run for real: the built binary on real Unix sockets, clients in real
/// namespaces (unshare, setpriv), real curl and real git; only Portal is the fake server.
final class AgentHarness: @unchecked Sendable {
    let portal: PortalHarness
    let runtime: String
    let scratch: String
    var agent: RunningProcess?

    var socket: String { runtime + "/portal-token/agent.sock" }
    var restrictedSocket: String { runtime + "/portal-token/agent-restricted.sock" }
    var rulesPath: String { scratch + "/agent.rules" }

    init(rules: String? = nil, clockShift: Int64? = nil, start: Bool = true) throws {
        portal = try PortalHarness(backend: .file)
        var template = Array("/tmp/portal-token-agent.XXXXXX".utf8CString)
        scratch = String(cString: mkdtemp(&template))
        runtime = scratch + "/run"
        mkdir(runtime, 0o700)
        mkdir(scratch + "/empty-home", 0o700)
        mkdir(scratch + "/bin", 0o755)
        symlink(ProcessRunner.portalTokenPath, scratch + "/bin/docker-credential-portal-token")
        if let rules { try write(rules: rules) }
        if start { try self.start(clockShift: clockShift) }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: scratch)
    }

    func write(rules: String) throws {
        try rules.write(toFile: rulesPath, atomically: false, encoding: .utf8)
        chmod(rulesPath, 0o600)
    }

    /// The agent's environment: the harness's store and Portal settings, and a runtime directory.
    func agentEnvironment(clockShift: Int64? = nil) throws -> [String: String] {
        var environment = try clockShift.map { try portal.environment(clockShift: $0) } ?? portal.git.environment
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        return environment
    }

    func start(
        clockShift: Int64? = nil, arguments: [String] = [], wrapper: [String] = [],
        environmentChanges: [String: String?] = [:]
    ) throws {
        let rules = FileManager.default.fileExists(atPath: rulesPath) ? ["--rules", rulesPath] : []
        var environment = try agentEnvironment(clockShift: clockShift)
        for (name, value) in environmentChanges { environment[name] = value }
        let command = wrapper + [ProcessRunner.portalTokenPath, "agent"] + rules + arguments
        let agent = try RunningProcess(command[0], Array(command.dropFirst()), environment: environment)
        try agent.waitForStderr(containing: "listening on")
        self.agent = agent
    }

    /// Starts the agent where the kernel refuses it keyrings (contrib/testing/deny-keyctl.c), the
    /// file's passphrase in a file it may read; returns that file's path.
    func startWithoutKeyrings() throws -> String {
        let passphraseFile = scratch + "/passphrase"
        try "scenario passphrase\n".write(toFile: passphraseFile, atomically: false, encoding: .utf8)
        chmod(passphraseFile, 0o600)
        try start(
            wrapper: [try Self.denyKeyctl()],
            environmentChanges: ["PORTAL_TOKEN_PASSPHRASE": nil, "PORTAL_TOKEN_PASSPHRASE_FILE": passphraseFile])
        return passphraseFile
    }

    func stop() {
        agent?.signal(SIGTERM)
        _ = try? agent?.finish(timeout: 10)
    }

    /// What a process in a container sees: no bus, no runtime directory, an empty home, and
    /// nothing of portal-token's but the socket.
    func clientEnvironment(socket: String? = nil) -> [String: String] {
        [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "HOME": scratch + "/empty-home",
            "PORTAL_TOKEN_AGENT_SOCK": socket ?? self.socket,
        ]
    }

    /// `portal-token ARGUMENTS` in client mode, as the host user.
    func client(_ arguments: [String], stdin: String? = nil, socket: String? = nil) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, arguments, stdin: stdin, environment: clientEnvironment(socket: socket))
    }

    /// A command in a sandbox: its own user, pid and mount namespaces (it believes it is uid 0,
    /// pid 1), and the kernel keyring denied by a seccomp filter, as Docker's default profile does.
    func sandboxed(_ command: [String], stdin: String? = nil, socket: String? = nil, timeout: Double = 30) throws
        -> ProcessResult
    {
        try ProcessRunner.run(
            "/usr/bin/unshare", ["-Urpf", "--mount-proc", try Self.denyKeyctl()] + command, stdin: stdin,
            environment: clientEnvironment(socket: socket), timeout: timeout)
    }

    /// contrib/testing/deny-keyctl.c, built by contrib/test.sh.
    static func denyKeyctl() throws -> String {
        guard let path = ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_DENY_KEYCTL"], !path.isEmpty else {
            throw MissingTestAid(name: "PORTAL_TOKEN_TEST_DENY_KEYCTL")
        }
        return path
    }

    /// The token adopted for the harness's environment, live at the fake Portal.
    @discardableResult
    func signIn(_ token: String = "agent-token-\(UInt32.random(in: 0...UInt32.max))") throws -> String {
        portal.server.registerLiveToken(token)
        #expect(try portal.adopt(token: token).exitCode == 0)
        return token
    }

    var log: String { agent?.stderr ?? "" }
}

/// A test aid contrib/test.sh builds and names in a variable is missing: the test fails.
struct MissingTestAid: Error, CustomStringConvertible {
    var name: String
    var description: String { "\(name) is not set: run the suite through contrib/test.sh" }
}

/// A raw request to the agent's Unix socket, connected as client mode connects; the answer as read
/// to the close (nil when it never closed).
func rawExchange(_ path: String, _ request: [UInt8], timeout: Int = 15) -> String? {
    guard let descriptor = try? AgentClient.connectedSocket(path: path, timeoutMilliseconds: timeout * 1000) else {
        return nil
    }
    defer { close(descriptor) }
    // Blocking from here on: each send waits for room, and each read at most the SO_RCVTIMEO below.
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    var offset = 0
    while offset < request.count {
        let sent = request[offset...].withUnsafeBytes {
            send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        if sent <= 0 { break }
        offset += sent
    }
    var timeoutValue = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeoutValue, socklen_t(MemoryLayout<timeval>.size))
    var response: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(descriptor, &chunk, chunk.count, 0)
        if count < 0, errno == EINTR { continue }
        if count < 0 { return errno == ECONNRESET ? String(decoding: response, as: UTF8.self) : nil }
        if count == 0 { break }
        response += chunk[0..<count]
    }
    return String(decoding: response, as: UTF8.self)
}

func statusCode(_ response: String?) -> Int? {
    guard let response, response.hasPrefix("HTTP/1.1 ") else { return nil }
    return Int(response.dropFirst(9).prefix(3))
}

@Suite("portal-token agent", .serialized)
struct AgentTests {
    @Test("a client in its own user and pid namespaces is known by its real uid and host pid, and refused by default")
    func namespacedClientRefused() throws {
        let harness = try AgentHarness()
        try harness.signIn()
        let result = try harness.sandboxed([
            "/bin/sh", "-c", "id -u; echo $$; exec \"$0\" token", ProcessRunner.portalTokenPath,
        ])
        // It believed it was uid 0, pid 1.
        #expect(result.stdout == "0\n1\n")
        #expect(result.exitCode == 4)
        #expect(result.stderr.contains("the caller is in another user namespace (decided by default)"))
        #expect(result.stderr.contains("hint: a rule in the agent's rules file can allow it"))
        // The agent saw the real uid and a host pid, and logged the refusal.
        let line = try #require(harness.log.split(separator: "\n").first { $0.contains("refused GET /v1/token") })
        #expect(line.contains("uid \(getuid()), gid \(getgid()), pid "))
        #expect(line.contains("user namespace other"))
        let pid = line.split(separator: ",").first { $0.hasPrefix(" pid ") }.flatMap { Int32($0.dropFirst(5)) }
        #expect(pid.map { $0 > 1 } == true, "pid in: \(line)")
    }

    @Test("a rule naming the namespaced client lets it read the token")
    func namespacedClientAllowedByRule() throws {
        let harness = try AgentHarness(
            rules: "rule sandboxes\n    uid \(getuid())\n    user-namespace other\n    allow token *\n")
        let token = try harness.signIn()
        let result = try harness.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout == token + "\n")
        // The same rule grants no write.
        let store = try harness.sandboxed(
            [ProcessRunner.portalTokenPath, "store"], stdin: "protocol=https\nhost=x.tld\nusername=u\npassword=p\n")
        #expect(store.exitCode == 4)
        #expect(store.stderr.contains("rule sandboxes does not grant a store, erase or lock"))
    }

    @Test("another uid is refused and logged, even when the socket's file mode would let it in")
    func otherUIDRefused() throws {
        let harness = try AgentHarness()
        try harness.signIn()
        // As if the socket were bound into a container whose user the file mode does not stop.
        chmod(harness.scratch, 0o755)
        chmod(harness.runtime, 0o755)
        chmod(harness.runtime + "/portal-token", 0o755)
        chmod(harness.socket, 0o666)
        let result = try ProcessRunner.run(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/curl", "-s", "-i", "--unix-socket",
                harness.socket, "http://localhost/v1/token",
            ], environment: harness.clientEnvironment())
        #expect(result.stdout.hasPrefix("HTTP/1.1 403 "), "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("Portal-Token-Decided-By: default"))
        #expect(result.stdout.contains("the caller is another user (uid 65534)"))
        #expect(harness.log.contains("refused GET /v1/token on the main socket for uid 65534, gid 65534"))
    }

    @Test(
        "with no bus, no runtime directory and keyctl denied, token, get, exec-credential and the Docker helper work"
    )
    func sandboxedClients() throws {
        let harness = try AgentHarness(
            rules: """
                rule sandbox
                    user-namespace other
                    allow token *
                    allow git-get *
                    allow docker-get *
                """)
        let token = try harness.signIn()
        // The filter really takes the kernel keyring away.
        let probe = try harness.sandboxed(["/bin/keyctl", "add", "user", "probe", "x", "@u"])
        #expect(probe.exitCode != 0)
        #expect(probe.stderr.contains("Operation not permitted"))
        // A registry credential, stored on the host.
        let store = try harness.portal.git.portalToken(
            ["store"], stdin: "protocol=https\nhost=registry.example\nusername=robot\npassword=registry-secret\n")
        #expect(store.exitCode == 0)

        let tokenResult = try harness.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(tokenResult.exitCode == 0 && tokenResult.stdout == token + "\n", "\(tokenResult.stderr)")
        let get = try harness.sandboxed([ProcessRunner.portalTokenPath, "get"], stdin: harness.portal.portalOrigin)
        #expect(get.exitCode == 0)
        #expect(get.stdout.contains("password=\(token)\n"))
        let credential = try harness.sandboxed([ProcessRunner.portalTokenPath, "exec-credential"])
        #expect(credential.exitCode == 0)
        #expect(credential.stdout.contains(#""token":"\#(token)""#))
        #expect(credential.stdout.contains(#""kind":"ExecCredential""#))
        let exec = try harness.sandboxed([
            ProcessRunner.portalTokenPath, "exec", "--", "/bin/sh", "-c", "echo \"$PORTAL_CLIENT_SESSION_TOKEN\"",
        ])
        #expect(exec.exitCode == 0 && exec.stdout == token + "\n")
        let dockerHelper = harness.scratch + "/bin/docker-credential-portal-token"
        let docker = try harness.sandboxed([dockerHelper, "get"], stdin: "registry.example")
        #expect(docker.exitCode == 0, "\(docker.stdout) \(docker.stderr)")
        #expect(docker.stdout.contains(#""Secret":"registry-secret""#))
        let missing = try harness.sandboxed([dockerHelper, "get"], stdin: "nothing.example")
        #expect(missing.exitCode == 1 && missing.stdout == "credentials not found in native keychain\n")
    }

    @Test("real git credential fill works in the sandbox through the curl one-liner")
    func gitThroughCurl() throws {
        let harness = try AgentHarness(rules: "rule sandbox\n    user-namespace other\n    allow git-get *\n")
        let token = try harness.signIn()
        let helper =
            "!f() { curl -s --unix-socket \"$PORTAL_TOKEN_AGENT_SOCK\" --data-binary @- "
            + "\"http://localhost/v1/git/$1\"; }; f"
        let result = try harness.sandboxed(
            ["/usr/bin/git", "-c", "credential.helper=\(helper)", "credential", "fill"],
            stdin: harness.portal.portalOrigin + "\n")
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.contains("username=user-1\n"))
        #expect(result.stdout.contains("password=\(token)\n"))
    }

    @Test("through the restricted socket, store, erase and logout are refused and reads a rule allows work")
    func restrictedSocket() throws {
        let harness = try AgentHarness(rules: "rule forwarded\n    socket restricted\n    allow token *\n")
        let token = try harness.signIn()
        let socket = harness.restrictedSocket
        let read = try harness.client(["token"], socket: socket)
        #expect(read.exitCode == 0 && read.stdout == token + "\n")
        let credential = "protocol=https\nhost=forwarded.example\nusername=u\npassword=p\n"
        let store = try harness.client(["store"], stdin: credential, socket: socket)
        #expect(store.exitCode == 4)
        #expect(store.stderr.contains("the restricted socket never stores, erases or locks"))
        let erase = try harness.client(
            ["erase"], stdin: harness.portal.portalOrigin + "password=\(token)\n", socket: socket)
        #expect(erase.exitCode == 4)
        let logout = try harness.client(["logout"], socket: socket)
        #expect(logout.exitCode == 4)
        #expect(logout.stderr.contains("logout is not served through the agent"))
        let lock = try harness.client(["lock"], socket: socket)
        #expect(lock.exitCode == 4 && lock.stderr.contains("never stores, erases or locks"), "\(lock.stderr)")
        // The session is still there, and a read the rule does not grant is refused.
        #expect(try harness.client(["token"], socket: socket).exitCode == 0)
        let get = try harness.client(["get"], stdin: harness.portal.portalOrigin, socket: socket)
        #expect(get.exitCode == 4 && get.stderr.contains("rule forwarded does not grant git get"))
        #expect(harness.portal.hookRuns.isEmpty)
    }

    @Test(
        """
        a client's end user reaches the agent: each end user's token by name, none named is exit 2 naming both, and \
        a rule naming one account admits that one alone
        """)
    func endUsersThroughTheAgent() throws {
        let harness = try AgentHarness(
            rules: "rule forwarded\n    socket restricted\n    allow token */alice\n", start: false)
        let tokens = [
            "alice": "agent-alice-\(UInt32.random(in: 0...UInt32.max))",
            "bob": "agent-bob-\(UInt32.random(in: 0...UInt32.max))",
        ]
        for (user, token) in tokens {
            harness.portal.server.registerLiveToken(token)
            #expect(try harness.portal.adopt(token: token, endUserID: user).exitCode == 0)
        }
        try harness.start()
        func client(_ user: String?, socket: String? = nil) throws -> ProcessResult {
            var environment = harness.clientEnvironment(socket: socket)
            environment["PORTAL_END_USER_ID"] = user
            return try ProcessRunner.run(ProcessRunner.portalTokenPath, ["token"], environment: environment)
        }
        for user in ["alice", "bob"] {
            let result = try client(user)
            #expect(result.exitCode == 0 && result.stdout == tokens[user]! + "\n", "\(user): \(result.stderr)")
        }
        let unchosen = try client(nil)
        #expect(unchosen.exitCode == 2, "\(unchosen.stderr)")
        #expect(unchosen.stderr.contains("2 end users are signed in"), "\(unchosen.stderr)")
        // The restricted socket's rule names alice's account: hers, and nobody else's.
        let alice = try client("alice", socket: harness.restrictedSocket)
        #expect(alice.exitCode == 0 && alice.stdout == tokens["alice"]! + "\n", "\(alice.stderr)")
        let bob = try client("bob", socket: harness.restrictedSocket)
        #expect(bob.exitCode == 4 && bob.stdout.isEmpty, "\(bob.stderr)")
        #expect(bob.stderr.contains("end user 'bob'"), "\(bob.stderr)")
        #expect(try client(nil, socket: harness.restrictedSocket).exitCode == 4)
    }

    @Test("client mode keeps the local exit codes: 1 when not signed in, 2 for bad input, 4 with no agent")
    func exitCodes() throws {
        let harness = try AgentHarness()
        let notSignedIn = try harness.client(["token"])
        #expect(notSignedIn.exitCode == 1)
        #expect(notSignedIn.stderr.contains("portal-token: error:"))
        let malformed = try harness.client(["store"], stdin: "garbage\n")
        #expect(malformed.exitCode == 2)
        let nothing = try harness.client(["get"], stdin: "protocol=https\nhost=nothing.example\n")
        #expect(nothing.exitCode == 0 && nothing.stdout.isEmpty)
        let missing = try harness.client(["token"], socket: harness.runtime + "/nothing.sock")
        #expect(missing.exitCode == 4)
        #expect(missing.stderr.contains("could not connect to the agent"))
    }

    @Test("200 clients at once each get the token")
    func twoHundredClients() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let request = Array("GET /v1/token HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
        let answers = try concurrently(200) { rawExchange(harness.socket, request) }
        let good = answers.filter { statusCode($0) == 200 && $0?.contains(#""token":"\#(token)""#) == true }
        #expect(good.count == 200, "\(answers.filter { statusCode($0) != 200 }.prefix(3))")
    }

    @Test("malformed and oversized requests get 400, 413 and 431, a silent client is dropped, and the agent stays up")
    func hostileClients() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        #expect(statusCode(rawExchange(harness.socket, Array("GARBAGE\r\n\r\n".utf8))) == 400)
        let bigBody = "POST /v1/git/get HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
        #expect(statusCode(rawExchange(harness.socket, Array(bigBody.utf8))) == 413)
        let bigHead = "GET /v1/token HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
        #expect(statusCode(rawExchange(harness.socket, Array(bigHead.utf8))) == 431)
        let badBody =
            "POST /v1/git/get HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\n\u{1}\u{2}=\n"
        #expect(statusCode(rawExchange(harness.socket, Array(badBody.utf8))) == 400)
        #expect(
            statusCode(rawExchange(harness.socket, Array("GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n".utf8))) == 404)
        // A client that sends nothing is closed at the 5-second deadline, unanswered.
        #expect(rawExchange(harness.socket, [], timeout: 15) == "")
        #expect(harness.agent.map { ProcessRunner.wait($0.pid, timeout: 0) == nil } == true)
        let after = try harness.client(["token"])
        #expect(after.exitCode == 0 && after.stdout == token + "\n")
    }

    @Test("when the agent is killed, clients fail with exit 4 within a second")
    func agentKilled() throws {
        let harness = try AgentHarness()
        try harness.signIn()
        #expect(try harness.client(["token"]).exitCode == 0)
        harness.agent?.signal(SIGKILL)
        _ = try harness.agent?.finish()
        for arguments in [["token"], ["status"]] {
            let result = try harness.client(arguments)
            #expect(result.exitCode == 4)
            #expect(result.duration < 1.0, "\(arguments): \(result.duration) s")
        }
        let git = try harness.client(["get"], stdin: harness.portal.portalOrigin)
        #expect(git.exitCode == 4 && git.duration < 1.0)
    }

    @Test("socket activation starts the agent on first use and it exits when idle")
    func socketActivation() throws {
        let harness = try AgentHarness(start: false)
        let token = try harness.signIn()
        let directory = harness.runtime + "/portal-token"
        mkdir(directory, 0o700)
        // systemd-socket-activate hands the program only the variables named with -E, as a
        // unit's Environment= would; XDG_RUNTIME_DIR is left out, since the sockets come from it.
        var environment = try harness.agentEnvironment()
        environment["XDG_RUNTIME_DIR"] = nil
        let passed = environment.keys.sorted().flatMap { ["-E", $0] }
        let activator = try RunningProcess(
            "/usr/bin/systemd-socket-activate",
            ["-l", harness.socket, "-l", harness.restrictedSocket] + passed + [
                ProcessRunner.portalTokenPath, "agent", "--idle-exit", "1",
            ], environment: environment)
        defer { activator.signal(SIGTERM) }
        try activator.waitForStderr(containing: "Listening on")
        #expect(!activator.stderr.contains("portal-token agent: listening"))
        let result = try harness.client(["token"])
        #expect(result.exitCode == 0 && result.stdout == token + "\n", "\(result.stderr) \(activator.stderr)")
        try activator.waitForStderr(containing: "from systemd")
        // Idle for a second: the agent ends, and systemd-socket-activate with it.
        let finished = try activator.finish(timeout: 20)
        #expect(finished.exitCode == 0, "\(finished.stderr)")
    }

    @Test("20 concurrent 401s through agent clients and local commands run the hook once")
    func concurrentUnauthorized() throws {
        let hour: Int64 = 3600
        // The agent and the local commands all see the session past its idle window.
        let harness = try AgentHarness(clockShift: 25 * hour)
        #expect(try harness.portal.adopt(token: "token-dead").exitCode == 0)
        // Answers wait until the ten local commands and the agent's first request are in.
        harness.portal.server.holdUnauthorized(until: 11)
        let local = try harness.portal.environment(clockShift: 25 * hour)
        let started = Locked(0)
        let codes = try concurrently(20) { () -> Int32 in
            let index = started.update { count in
                count += 1
                return count
            }
            if index % 2 == 0 {
                return try harness.client(["token"]).exitCode
            }
            return try ProcessRunner.run(ProcessRunner.portalTokenPath, ["token"], environment: local).exitCode
        }
        #expect(codes.allSatisfy { $0 == 3 || $0 == 1 }, "exit codes: \(codes)")
        #expect(codes.contains(3))
        #expect(harness.portal.hookRuns.filter { !$0.hasPrefix("hook read stdin") }.count == 1)
        #expect(try harness.client(["token"]).exitCode == 1)
    }

    @Test("a use through the agent past the idle window asks Portal once and slides the expiry for local uses too")
    func slideThroughAgent() throws {
        let hour: Int64 = 3600
        let harness = try AgentHarness(clockShift: 25 * hour)
        harness.portal.server.registerLiveToken("token-slides")
        #expect(try harness.portal.adopt(token: "token-slides").exitCode == 0)
        let result = try harness.client(["token"])
        #expect(result.exitCode == 0 && result.stdout == "token-slides\n")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").count == 1)
        // 47 h after adoption, 22 h after the agent's check: the slid expiry needs no request.
        let later = try harness.portal.portalToken(["token"], clockShift: 47 * hour)
        #expect(later.exitCode == 0 && later.stdout == "token-slides\n")
        #expect(harness.portal.requests(to: "/api/v3/clients/me").count == 1)
        #expect(harness.portal.hookRuns.isEmpty)
    }

    @Test(
        """
        where the kernel refuses keyrings to the agent, it keeps the file's key and the session in its memory, and \
        lock empties it, in client mode and on the host
        """)
    func keysInMemory() throws {
        let harness = try AgentHarness(start: false)
        let token = try harness.signIn()
        let passphraseFile = try harness.startWithoutKeyrings()
        let first = try harness.client(["token"])
        #expect(first.exitCode == 0 && first.stdout == token + "\n", "\(first.stderr)")
        // With the passphrase gone and no kernel keyring, only the agent's memory can answer.
        unlink(passphraseFile)
        let second = try harness.client(["token"])
        #expect(second.exitCode == 0 && second.stdout == token + "\n", "\(second.stderr)")
        let credential = try harness.client(["get"], stdin: "protocol=https\nhost=nothing.example\n")
        #expect(credential.exitCode == 0, "\(credential.stderr)")
        // `lock` in client mode empties the agent's memory: with no passphrase source left, the
        // next read cannot open the file.
        let lock = try harness.client(["lock"])
        #expect(lock.exitCode == 0 && lock.stderr.contains("dropped every cached key"), "\(lock.stderr)")
        let locked = try harness.client(["token"])
        #expect(locked.exitCode == 4 && locked.stdout.isEmpty, "\(locked.stderr)")
        // So does `lock` on the agent's host, which finds the agent by its socket (itself kept
        // off the kernel keyring, which other tests running meanwhile share).
        try "scenario passphrase\n".write(toFile: passphraseFile, atomically: false, encoding: .utf8)
        chmod(passphraseFile, 0o600)
        #expect(try harness.client(["token"]).exitCode == 0)
        unlink(passphraseFile)
        let hostLock = try ProcessRunner.run(
            try AgentHarness.denyKeyctl(), [ProcessRunner.portalTokenPath, "lock"],
            environment: try harness.agentEnvironment())
        #expect(hostLock.exitCode == 0 && hostLock.stderr.contains("the agent's too"), "\(hostLock.stderr)")
        #expect(try harness.client(["token"]).exitCode == 4)
    }

    @Test("the agent's audit lines name the caller the kernel reports, refusals included; clients write none")
    func auditNamesTheCaller() throws {
        let harness = try AgentHarness(
            rules: "rule sandboxes\n    user-namespace other\n    allow git-get *\n", start: false)
        let state = harness.scratch + "/state"
        try harness.start(environmentChanges: ["XDG_STATE_HOME": state])
        try harness.signIn()
        #expect(try harness.client(["token"]).exitCode == 0)
        #expect(try harness.sandboxed([ProcessRunner.portalTokenPath, "token"]).exitCode == 4)
        let text = (try? String(contentsOfFile: state + "/portal-token/audit.jsonl", encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(text)")
        let agentPID = try #require(harness.agent?.pid)
        for line in lines {
            let object = try JSONValue.parse(line)
            let caller = try #require(object["caller"])
            #expect(caller["pid"]?.int64Value.map { $0 > 1 && $0 != Int64(agentPID) } == true, "\(line)")
            #expect(caller["uid"]?.int64Value == Int64(getuid()))
            #expect(caller["socket"]?.stringValue == "main")
            #expect(object["operation"]?.stringValue == "token")
        }
        #expect(lines.first.map { (try? JSONValue.parse($0))?["outcome"]?.stringValue } == "served")
        #expect(lines.last.map { (try? JSONValue.parse($0))?["outcome"]?.stringValue } == "refused")
        // The clients, with their own (empty) home, wrote no audit line of their own.
        #expect(!FileManager.default.fileExists(atPath: harness.scratch + "/empty-home/.local/state"))
    }

    @Test("the agent refuses a runtime directory others may write, and a rules file others may write")
    func unsafeFiles() throws {
        let harness = try AgentHarness(start: false)
        mkdir(harness.runtime + "/portal-token", 0o700)
        chmod(harness.runtime + "/portal-token", 0o777)
        let result = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent"], environment: try harness.agentEnvironment())
        #expect(result.exitCode == 4)
        #expect(result.stderr.contains("others may write to it"))
        chmod(harness.runtime + "/portal-token", 0o700)
        try harness.write(rules: "rule x\n    allow token *\n")
        chmod(harness.rulesPath, 0o666)
        let rules = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent", "--rules", harness.rulesPath],
            environment: try harness.agentEnvironment())
        #expect(rules.exitCode == 2)
        #expect(rules.stderr.contains("others may write to it"))
    }

    @Test("no token, password or body reaches the agent's log, even with --verbose")
    func logCarriesNoSecret() throws {
        let harness = try AgentHarness(start: false)
        try harness.start(arguments: ["--verbose"])
        let token = try harness.signIn("canary-token-\(UInt32.random(in: 0...UInt32.max))")
        #expect(try harness.client(["token"]).stdout == token + "\n")
        let store = try harness.client(
            ["store"], stdin: "protocol=https\nhost=canary.example\nusername=u\npassword=canary-password\n")
        #expect(store.exitCode == 0)
        #expect(
            try harness.client(["get"], stdin: "protocol=https\nhost=canary.example\n").stdout.contains(
                "canary-password"))
        harness.stop()
        #expect(harness.log.contains("GET /v1/token"))
        #expect(!harness.log.contains("canary"))
    }
}
