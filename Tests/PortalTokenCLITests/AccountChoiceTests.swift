import Foundation
import PortalTokenTestSupport
import Testing

/// Several accounts side by side, chosen by context (docs/sessions.md, "Choosing an account"):
/// two environments and two end users of one of them, two repositories bound each to its own,
/// `token` and a real `git push` in each, and no choice in one shell reaching another.
@Suite("several accounts, chosen by context")
struct AccountChoiceTests {
    /// Runs `command` with `arguments` in `directory`, as a shell there would.
    private func run(
        in directory: URL, _ command: String, _ arguments: [String], environment: [String: String]
    ) throws -> ProcessResult {
        try ProcessRunner.run(
            "/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", directory.path, command] + arguments,
            environment: environment)
    }

    /// A git server on loopback that asks for credentials (401 with a Basic challenge), writes
    /// each `Authorization` it is given to `log`, and answers it with 403, so git shows the
    /// credential once and never rejects it.
    private func startGitServer(log: URL, portFile: URL) throws -> pid_t {
        let script = """
            import http.server, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    auth = self.headers.get("Authorization")
                    if auth is None:
                        self.send_response(401)
                        self.send_header("WWW-Authenticate", 'Basic realm="git"')
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    with open(sys.argv[1], "a") as f:
                        f.write(auth + "\\n")
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                def log_message(self, *args):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            with open(sys.argv[2], "w") as f:
                f.write(str(server.server_address[1]))
            server.serve_forever()
            """
        let path = log.deletingLastPathComponent().appendingPathComponent("git-server.py")
        try script.write(to: path, atomically: false, encoding: .utf8)
        return try ProcessRunner.spawn(
            "/usr/bin/python3", [path.path, log.path, portFile.path], environment: ProcessRunner.environment())
    }

    @Test(
        """
        two environments and two end users stored, two repositories bound each to its own: token and git push in \
        each use their own account, accounts explains both, and one shell's choice changes nothing for another
        """)
    func perDirectoryAccounts() throws {
        let portal = try PortalHarness(backend: .file)
        let scratch = portal.git.directory
        let log = scratch.appendingPathComponent("authorizations")
        let portFile = scratch.appendingPathComponent("git-server.port")
        let server = try startGitServer(log: log, portFile: portFile)
        defer {
            kill(server, SIGKILL)
            _ = waitpid(server, nil, 0)
        }
        var waited = 0
        while (try? String(contentsOf: portFile, encoding: .utf8))?.isEmpty != false, waited < 100 {
            usleep(50_000)
            waited += 1
        }
        let port = try #require(try? String(contentsOf: portFile, encoding: .utf8))
        // The git server is the Portal origin: git's requests for it are answered from the session.
        var environment = portal.git.environment
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(port)"
        let origin = "protocol=http\nhost=127.0.0.1:\(port)\n"
        let (envA, envB) = ("env-a-\(UInt32.random(in: 0...UInt32.max))", "env-b-\(UInt32.random(in: 0...UInt32.max))")
        let tokens = [
            "alice": "token-alice-\(UUID().uuidString)", "bob": "token-bob-\(UUID().uuidString)",
            "carol": "token-carol-\(UUID().uuidString)",
        ]
        for (env, user) in [(envA, "alice"), (envA, "bob"), (envB, "carol")] {
            var adopting = environment
            adopting["PORTAL_AUTH_ENVIRONMENT_ID"] = env
            let stored = try ProcessRunner.portalToken(
                ["store"], stdin: origin + "username=\(user)\npassword=\(tokens[user]!)\n", environment: adopting)
            #expect(stored.exitCode == 0, "\(stored.stderr)")
        }
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = nil

        // Three accounts and none chosen: exit 2, naming them and how to choose.
        let unchosen = try ProcessRunner.portalToken(["token"], environment: environment)
        #expect(unchosen.exitCode == 2)
        #expect(unchosen.stderr.contains("3 accounts are signed in on this machine and none is chosen"))
        #expect(unchosen.stderr.contains("portal-token accounts use"), "\(unchosen.stderr)")
        // One environment named, two end users in it: exit 2 naming both.
        var named = environment
        named["PORTAL_AUTH_ENVIRONMENT_ID"] = envA
        let twoUsers = try ProcessRunner.portalToken(["token"], environment: named)
        #expect(twoUsers.exitCode == 2)
        #expect(twoUsers.stderr.contains("2 end users are signed in to '\(envA)'"), "\(twoUsers.stderr)")
        named["PORTAL_END_USER_ID"] = "alice"
        #expect(try ProcessRunner.portalToken(["token"], environment: named).stdout == tokens["alice"]! + "\n")

        // Two repositories, each bound to its own account.
        let repositories = ["a", "b"].map { scratch.appendingPathComponent("repository-\($0)") }
        for repository in repositories {
            try FileManager.default.createDirectory(
                at: repository.appendingPathComponent("sub"), withIntermediateDirectories: true)
            #expect(try run(in: repository, "/usr/bin/git", ["init", "-q"], environment: environment).exitCode == 0)
            let commit = try run(
                in: repository, "/usr/bin/git",
                ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x"],
                environment: environment)
            #expect(commit.exitCode == 0, "\(commit.stderr)")
        }
        let bindA = try run(
            in: repositories[0], ProcessRunner.portalTokenPath, ["accounts", "use", envA, "bob"],
            environment: environment)
        #expect(bindA.exitCode == 0, "\(bindA.stderr)")
        let bindB = try run(
            in: repositories[1], ProcessRunner.portalTokenPath, ["accounts", "use", envB], environment: environment)
        #expect(bindB.exitCode == 0, "\(bindB.stderr)")

        for (repository, user) in [(repositories[0], "bob"), (repositories[1], "carol")] {
            for directory in [repository, repository.appendingPathComponent("sub")] {
                let token = try run(in: directory, ProcessRunner.portalTokenPath, ["token"], environment: environment)
                #expect(token.exitCode == 0, "\(token.stderr)")
                #expect(token.stdout == tokens[user]! + "\n", "\(directory.path)")
            }
            // A real git push asks portal-token in the repository, and sends that account's token.
            try? FileManager.default.removeItem(at: log)
            let push = try run(
                in: repository, "/usr/bin/git",
                [
                    "-c", "credential.helper=", "-c", "credential.helper=portal-token", "push", "-q",
                    "http://127.0.0.1:\(port)/repository.git", "HEAD:refs/heads/main",
                ],
                environment: environment)
            #expect(push.exitCode != 0, "the server answers 403 once it has the credential")
            let sent = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            let expected = "Basic " + Data("\(user):\(tokens[user]!)".utf8).base64EncodedString()
            #expect(sent.split(separator: "\n").map(String.init) == [expected], "\(push.stderr)")
        }

        // accounts explains both, and which applies here and why.
        let explained = try run(
            in: repositories[0].appendingPathComponent("sub"), ProcessRunner.portalTokenPath, ["accounts"],
            environment: environment)
        #expect(explained.exitCode == 0, "\(explained.stderr)")
        #expect(explained.stdout.contains("* account    \(envA)  end user bob"), "\(explained.stdout)")
        #expect(explained.stdout.contains("  account    \(envB)  end user carol"), "\(explained.stdout)")
        #expect(explained.stdout.contains("  directory  \(repositories[0].path)  \(envA)  end user bob"))
        #expect(explained.stdout.contains("  directory  \(repositories[1].path)  \(envB)"))
        #expect(
            explained.stdout.contains(
                "here: \(envA), end user bob (chosen by the account of \(repositories[0].path), bound in "),
            "\(explained.stdout)")
        #expect(tokens.values.allSatisfy { !explained.stdout.contains($0) }, "never a token")
        let status = try run(
            in: repositories[1], ProcessRunner.portalTokenPath, ["status"], environment: environment)
        #expect(status.stdout.contains("chosen by:"), "\(status.stdout)")
        #expect(status.stdout.contains(repositories[1].path), "\(status.stdout)")

        // One shell names another account for itself: another shell in the same repository is
        // unchanged, and so is this one once the variable is gone.
        var elsewhere = environment
        elsewhere["PORTAL_AUTH_ENVIRONMENT_ID"] = envB
        let overridden = try run(in: repositories[0], ProcessRunner.portalTokenPath, ["token"], environment: elsewhere)
        #expect(overridden.stdout == tokens["carol"]! + "\n")
        let unchanged = try run(in: repositories[0], ProcessRunner.portalTokenPath, ["token"], environment: environment)
        #expect(unchanged.stdout == tokens["bob"]! + "\n")

        // The binding goes with --unset; the accounts file is the user's own, never the directory's.
        let unbound = try run(
            in: repositories[0], ProcessRunner.portalTokenPath, ["accounts", "use", "--unset"],
            environment: environment)
        #expect(unbound.exitCode == 0, "\(unbound.stderr)")
        #expect(
            try run(in: repositories[0], ProcessRunner.portalTokenPath, ["token"], environment: environment).exitCode
                == 2)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: repositories[0].path).filter { $0 != ".git" }
                == ["sub"])
    }

    @Test("logout signs out one end user, and the other end user of the environment stays signed in and remembered")
    func logoutOneEndUser() throws {
        let portal = try PortalHarness(backend: .file)
        for (user, token) in [("alice", "token-alice-logout"), ("bob", "token-bob-logout")] {
            #expect(try portal.adopt(token: token, endUserID: user).exitCode == 0)
        }
        let out = try portal.git.portalToken(["logout", "--end-user", "bob"])
        #expect(out.exitCode == 0, "\(out.stderr)")
        // One left: the environment alone chooses it again.
        #expect(try portal.git.portalToken(["token"]).stdout == "token-alice-logout\n")
        let accounts = try portal.git.portalToken(["accounts", "--format", "json"])
        #expect(accounts.stdout.contains(#""endUserId":"alice""#), "\(accounts.stdout)")
        #expect(!accounts.stdout.contains(#""endUserId":"bob""#), "\(accounts.stdout)")
        // A logout naming no end user signs out the one served, and no other.
        #expect(try portal.adopt(token: "token-carol-logout", endUserID: "carol").exitCode == 0)
        #expect(try portal.git.portalToken(["logout", "--end-user", "carol"]).exitCode == 0)
        #expect(try portal.git.portalToken(["logout"]).exitCode == 0)
        #expect(try portal.git.portalToken(["token"]).exitCode == 1)
    }
}
