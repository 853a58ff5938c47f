import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The commands for scripts and tools: `token`, `exec` and `exec-credential`, end to end with the
/// binary, a real store and the fake Portal server.
@Suite("scripting: token, exec, exec-credential")
struct ScriptingTests {
    @Test(
        "in a while-read loop over three lines, T=$(portal-token token) runs three times with the token",
        arguments: TestBackend.allCases)
    func tokenInsideReadLoop(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        #expect(try portal.adopt(token: "token-loop").exitCode == 0)
        let scratch = try ScratchFolder("script")
        try "one\ntwo\nthree\n".write(toFile: "\(scratch.path)/lines", atomically: true, encoding: .utf8)
        let script = #"while read -r line; do T=$("$0" token); echo "$line:$T:$?"; done < "$1""#
        let result = try ProcessRunner.run(
            "/bin/sh", ["-c", script, ProcessRunner.portalTokenPath, "\(scratch.path)/lines"],
            environment: portal.git.environment)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout == "one:token-loop:0\ntwo:token-loop:0\nthree:token-loop:0\n")
    }

    @Test("token on an open, silent pipe returns within 2 s without reading it")
    func tokenOnOpenPipe() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: "token-pipe").exitCode == 0)
        let scratch = try ScratchFolder("script")
        let fifo = "\(scratch.path)/pipe"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Held open for writing and never written to: `sleep 30 | portal-token token`.
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let started = ProcessRunner.monotonicSeconds()
        let pid = try ProcessRunner.spawn(
            ProcessRunner.portalTokenPath, ["token"], environment: portal.git.environment,
            stdin: fifo, stdout: "\(scratch.path)/out", stderr: "\(scratch.path)/err")
        let status = ProcessRunner.wait(pid, timeout: 2)
        if status == nil { kill(pid, SIGKILL); _ = waitpid(pid, nil, 0) }
        #expect(status == 0, "\(scratch.read("err"))")
        #expect(ProcessRunner.monotonicSeconds() - started < 2)
        #expect(scratch.read("out") == "token-pipe\n")
    }

    @Test("token --format json is get's JSON object, and not signed in is exit 1")
    func tokenJSONAndNotSignedIn() throws {
        let portal = try PortalHarness(backend: .file)
        let missing = try portal.git.portalToken(["token"])
        #expect(missing.exitCode == 1 && missing.stdout.isEmpty)
        #expect(missing.stderr.hasPrefix("portal-token: error: "))
        #expect(try portal.adopt(token: "token-json").exitCode == 0)
        let result = try portal.git.portalToken(["token", "--format", "json"])
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String]
        #expect(object?["token"] == "token-json" && object?["endUserId"] == "user-1")
        #expect(object?["authEnvironmentId"] == portal.environmentID)
        #expect(object?["expiresAt"]?.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/) != nil)
        #expect(try portal.git.portalToken(["token", "--format", "yaml"]).exitCode == 2)
    }

    @Test(
        "exec runs the command in its own process with the session in the environment and returns its exit code",
        arguments: TestBackend.allCases)
    func execPassesTheSession(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        #expect(try portal.adopt(token: "token-exec-secret", endUserID: "user-e").exitCode == 0)
        let scratch = try ScratchFolder("script")
        // The child records its PID, environment, argv and open descriptors, then exits 7.
        let child = """
            import os, sys
            d = sys.argv[1]
            open(d + "/pid", "w").write("%d\\n" % os.getpid())
            open(d + "/env", "w").write("".join("%s=%s\\n" % item for item in os.environ.items()))
            open(d + "/cmdline", "wb").write(open("/proc/self/cmdline", "rb").read())
            fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))[:-1]
            open(d + "/fds", "w").write("\\n".join(map(str, fds)))
            sys.exit(7)
            """
        // bash closes every descriptor the test runner leaked and execs portal-token in its place, so
        // the PID stays the one started here and portal-token starts with 0, 1 and 2 only.
        let closeAndExec =
            #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null; exec "$@""#
        let pid = try ProcessRunner.spawn(
            "/bin/bash",
            [
                "-c", closeAndExec, "bash", ProcessRunner.portalTokenPath,
                "exec", "--", "python3", "-c", child, scratch.path,
            ],
            environment: portal.git.environment,
            stdout: "\(scratch.path)/out", stderr: "\(scratch.path)/err")
        let status = ProcessRunner.wait(pid, timeout: 30)
        #expect(status == 7, "\(scratch.read("err"))")
        #expect(scratch.read("pid") == "\(pid)\n", "the child is the process that was started")
        let environment = Dictionary(
            scratch.read("env").split(separator: "\n").compactMap { line -> (String, String)? in
                guard let equals = line.firstIndex(of: "=") else { return nil }
                return (String(line[..<equals]), String(line[line.index(after: equals)...]))
            }, uniquingKeysWith: { first, _ in first })
        #expect(environment["PORTAL_CLIENT_SESSION_TOKEN"] == "token-exec-secret")
        #expect(
            environment["PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT"]?.wholeMatch(
                of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/) != nil)
        #expect(environment["PORTAL_AUTH_ENVIRONMENT_ID"] == portal.environmentID)
        #expect(environment["PORTAL_END_USER_ID"] == "user-e")
        #expect(environment["PORTAL_TOKEN_PASSPHRASE"] == nil, "the file passphrase never reaches the child")
        #expect(!scratch.read("cmdline").contains("token-exec-secret"))
        #expect(
            scratch.read("fds").split(separator: "\n").sorted() == ["0", "1", "2"],
            "no descriptor portal-token opened reaches the child: \(scratch.read("fds"))")
        #expect(
            !scratch.read("err").contains("token-exec-secret") && !scratch.read("out").contains("token-exec-secret"))
    }

    @Test("exec --token-var names the variable, and options after -- belong to the command")
    func execTokenVariable() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: "token-var").exitCode == 0)
        let result = try portal.git.portalToken([
            "exec", "--token-var", "MY_TOKEN", "--", "/bin/sh", "-c",
            #"echo "$MY_TOKEN:${PORTAL_CLIENT_SESSION_TOKEN-unset}:$1""#, "sh", "--help",
        ])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout == "token-var:unset:--help\n")
        #expect(try portal.git.portalToken(["exec", "--token-var", "1BAD", "--", "true"]).exitCode == 2)
        // A name exec sets itself, or PATH, would lose the token or the command: refused, nothing run.
        for reserved in [
            "PORTAL_END_USER_ID", "PORTAL_AUTH_ENVIRONMENT_ID", "PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT", "PATH",
        ] {
            let refused = try portal.git.portalToken(["exec", "--token-var", reserved, "--", "/bin/echo", "ran"])
            #expect(refused.exitCode == 2 && refused.stdout.isEmpty, "\(reserved): \(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.hasPrefix("portal-token: error: --token-var cannot be \(reserved)"))
        }
    }

    @Test("exec passes every word after the program's name to it, settings flags included, with or without --")
    func execArgumentsBelongToTheProgram() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: "token-args").exitCode == 0)
        let scratch = try ScratchFolder("script")
        let tool = "\(scratch.path)/tool"
        try writeExecutableScript(
            "#!/bin/sh\nprintf '%s|' \"$@\"\necho \"$PORTAL_AUTH_ENVIRONMENT_ID:$PORTAL_CLIENT_SESSION_TOKEN\"\n",
            to: URL(fileURLWithPath: tool))
        let expected = "--env|x|--api-host|h|--verbose|\(portal.environmentID):token-args\n"
        for separator in [[], ["--"]] {
            let result = try portal.git.portalToken(
                ["exec"] + separator + [tool, "--env", "x", "--api-host", "h", "--verbose"])
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
            #expect(result.stdout == expected)
        }
        // Before the command name a settings flag is portal-token's.
        let other = try portal.git.portalToken(["--env", "env-other", "exec", tool])
        #expect(other.exitCode == 1 && other.stdout.isEmpty, "\(other.stderr)")
    }

    @Test("exec gives 127 for a command not found and 126 for one that cannot run, as env(1)")
    func execNotFoundAndNotExecutable() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: "token-126").exitCode == 0)
        let missing = try portal.git.portalToken(["exec", "--", "portal-token-no-such-command"])
        #expect(missing.exitCode == 127)
        #expect(missing.stderr.hasPrefix("portal-token: error: cannot run 'portal-token-no-such-command'"))
        let scratch = try ScratchFolder("script")
        let plain = "\(scratch.path)/not-executable"
        try "#!/bin/sh\necho ran\n".write(toFile: plain, atomically: true, encoding: .utf8)
        let notExecutable = try portal.git.portalToken(["exec", "--", plain])
        #expect(notExecutable.exitCode == 126 && notExecutable.stdout.isEmpty)
        #expect(!missing.stderr.contains("token-126") && !notExecutable.stderr.contains("token-126"))
    }

    @Test("exec without a session exits 1 and runs nothing")
    func execWithoutSession() throws {
        let portal = try PortalHarness(backend: .file)
        let result = try portal.git.portalToken(["exec", "--", "/bin/echo", "ran"])
        #expect(result.exitCode == 1 && result.stdout.isEmpty)
    }

    @Test("exec-credential prints an ExecCredential: v1 by default, v1beta1 when KUBERNETES_EXEC_INFO asks")
    func execCredential() throws {
        let portal = try PortalHarness(backend: .file)
        #expect(try portal.adopt(token: "token-k8s").exitCode == 0)
        func credential(_ execInfo: String?) throws -> [String: Any] {
            var environment = portal.git.environment
            environment["KUBERNETES_EXEC_INFO"] = execInfo
            let result = try ProcessRunner.portalToken(["exec-credential"], environment: environment)
            #expect(result.exitCode == 0, "\(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        }
        for (execInfo, version) in [
            (nil, "client.authentication.k8s.io/v1"),
            (
                #"""
                {"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1",\#
                "spec":{"interactive":false}}
                """#,
                "client.authentication.k8s.io/v1"
            ),
            (
                #"""
                {"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1",\#
                "spec":{"interactive":true}}
                """#,
                "client.authentication.k8s.io/v1beta1"
            ),
        ] {
            let object = try credential(execInfo)
            #expect(object["apiVersion"] as? String == version)
            #expect(object["kind"] as? String == "ExecCredential")
            let status = try #require(object["status"] as? [String: Any])
            #expect(status["token"] as? String == "token-k8s")
            #expect(
                (status["expirationTimestamp"] as? String)?.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/)
                    != nil)
        }
        var environment = portal.git.environment
        environment["KUBERNETES_EXEC_INFO"] = #"{"apiVersion":"client.authentication.k8s.io/v1alpha1"}"#
        let unknown = try ProcessRunner.portalToken(["exec-credential"], environment: environment)
        #expect(unknown.exitCode == 2 && unknown.stdout.isEmpty)
    }
}

/// `login --with-token`: a token from the user's own backend, checked once with Portal.
@Suite("login --with-token")
struct TokenAdoptionTests {
    @Test("a good token is stored, with the end user Portal names or the one given", arguments: TestBackend.allCases)
    func adoptsGoodToken(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        portal.server.registerLiveToken("token-adopt", clientID: "client-77")
        let login = try portal.git.portalToken(["login", "--with-token"], stdin: "token-adopt\n")
        #expect(login.exitCode == 0, "\(login.stderr)")
        #expect(login.stdout.isEmpty && !login.stderr.contains("token-adopt"))
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
        #expect(portal.requests(to: "/api/v3/clients/me").first?.bearerToken == "token-adopt")
        #expect(try portal.git.portalToken(["token"]).stdout == "token-adopt\n")
        #expect(try portal.git.portalToken(["status"]).stdout.contains("signed in as client-77"))

        portal.server.registerLiveToken("token-other")
        #expect(
            try portal.git.portalToken(["login", "--with-token", "--end-user", "user-given"], stdin: "token-other")
                .exitCode == 0)
        // A second end user of the environment is kept beside the first: each is chosen by name.
        #expect(
            try portal.git.portalToken(["--end-user", "user-given", "status"]).stdout.contains(
                "signed in as user-given"))
        #expect(try portal.git.portalToken(["token", "--end-user", "client-77"]).stdout == "token-adopt\n")
        let unchosen = try portal.git.portalToken(["status"])
        #expect(unchosen.exitCode == 2)
        #expect(
            unchosen.stderr.contains("2 end users are signed in to '\(portal.environmentID)'"), "\(unchosen.stderr)")
    }

    @Test(
        "in a new shell with no Portal variable, the account signed in is used: token, status, refresh",
        arguments: TestBackend.allCases)
    func newShellUsesTheRememberedAccount(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        portal.server.registerLiveToken("token-remembered", clientID: "client-88")
        #expect(try portal.git.portalToken(["login", "--with-token"], stdin: "token-remembered\n").exitCode == 0)
        var shell = portal.git.environment
        shell["PORTAL_AUTH_ENVIRONMENT_ID"] = nil
        shell["PORTAL_API_HOST"] = nil
        let run = { (arguments: [String]) in
            try ProcessRunner.run(ProcessRunner.portalTokenPath, arguments, environment: shell, timeout: 30)
        }
        let token = try run(["token"])
        #expect(token.exitCode == 0 && token.stdout == "token-remembered\n", "\(token.stderr)")
        let status = try run(["status"])
        #expect(status.stdout.contains("signed in as client-88"), "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("chosen by:    the one account signed in on this machine"))
        // The API host it signed in on is remembered too: refresh reaches the same server.
        let before = portal.requests(to: "/api/v3/clients/me").count
        #expect(try run(["refresh"]).exitCode == 0)
        #expect(portal.requests(to: "/api/v3/clients/me").count == before + 1)
    }

    @Test(
        "a token Portal refuses gives exit 6 and leaves the stored session as it was", arguments: TestBackend.allCases)
    func refusesBadToken(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        portal.server.registerLiveToken("token-kept")
        #expect(try portal.adopt(token: "token-kept").exitCode == 0)
        let login = try portal.git.portalToken(["login", "--with-token"], stdin: "token-refused\n")
        #expect(login.exitCode == 6)
        #expect(login.stderr.hasPrefix("portal-token: error: Portal refused the token"))
        #expect(!login.stderr.contains("token-refused"))
        #expect(try portal.git.portalToken(["token"]).stdout == "token-kept\n")
        #expect(portal.hookRuns.isEmpty)
    }
}
