@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Every command, run in-process with fakes: its output on stdout and stderr and its exit code.
@Suite("commands in-process")
struct CommandTests {
    // MARK: git's credential protocol

    @Test("store, get and erase keep a git credential in the credential store")
    func storeGetErase() throws {
        let cli = try InProcessCLI()
        let store = cli.run(["store"], stdin: "protocol=https\nhost=git.example\nusername=u\npassword=p1\n")
        #expect(store.exitCode == 0 && store.stdout.isEmpty && store.stderr.isEmpty)
        #expect(try cli.credentials.lookup(CredentialQuery()).map(\.username) == ["u"])
        let get = cli.run(["get"], stdin: "protocol=https\nhost=git.example\n\n")
        #expect(get.exitCode == 0 && get.stderr.isEmpty)
        #expect(get.stdout == "username=u\npassword=p1\n")
        let erase = cli.run(["erase"], stdin: "protocol=https\nhost=git.example\n")
        #expect(erase.exitCode == 0 && erase.stdout.isEmpty && erase.stderr.isEmpty)
        #expect(try cli.credentials.lookup(CredentialQuery()).isEmpty)
        let miss = cli.run(["get"], stdin: "protocol=https\nhost=git.example\n")
        #expect(miss.exitCode == 0 && miss.stdout.isEmpty && miss.stderr.isEmpty)
    }

    @Test("get for Portal's API host answers from the session, not from storage")
    func getPortalOrigin() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "tok-portal", endUserID: "user-7")
        let get = cli.run(["get"], stdin: "protocol=https\nhost=api.portalhq.io\n\n")
        #expect(get.exitCode == 0 && get.stderr.isEmpty)
        #expect(get.stdout.hasPrefix("username=user-7\npassword=tok-portal\n"))
        #expect(cli.transport.requests.isEmpty)
    }

    @Test("erase of the rejected session token ends the session (exit 3) and runs the hook")
    func erasePortalOrigin() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "tok-rejected")
        let erase = cli.run(["erase"], stdin: "protocol=https\nhost=api.portalhq.io\npassword=tok-rejected\n")
        #expect(erase.exitCode == 3 && erase.stdout.isEmpty)
        #expect(cli.storedSession == .absent)
        #expect(cli.endedEndUsers == ["user-1"])
    }

    @Test("store of a Portal token with its end user adopts it as the session")
    func storePortalOrigin() throws {
        let cli = try InProcessCLI()
        let store = cli.run(
            ["store"], stdin: "protocol=https\nhost=api.portalhq.io\nusername=user-9\npassword=tok-new\n")
        #expect(store.exitCode == 0 && store.stdout.isEmpty && store.stderr.isEmpty)
        guard case .present(let session) = cli.storedSession else { Issue.record("no session stored"); return }
        #expect(session.endUserID == "user-9" && session.token == Secret("tok-new"))
        #expect(try cli.credentials.lookup(CredentialQuery()).isEmpty)
    }

    @Test("capability lists authtype and state, reading nothing")
    func capability() throws {
        let result = try InProcessCLI().run(["capability"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(result.stdout == "version 0\ncapability authtype\ncapability state\n")
    }

    // MARK: Scripts

    @Test("token prints the session's token alone; not signed in is exit 1")
    func token() throws {
        let cli = try InProcessCLI()
        let missing = cli.run(["token"])
        #expect(missing.exitCode == 1 && missing.stdout.isEmpty)
        #expect(missing.stderr.hasPrefix("portal-token: error: "))
        try cli.signIn(token: "tok-script")
        let result = cli.run(["token"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(result.stdout == "tok-script\n")
        let bad = cli.run(["token", "--format", "yaml"])
        #expect(bad.exitCode == 2 && bad.stdout.isEmpty)
        #expect(bad.stderr.hasPrefix("portal-token: error: --format takes only json, not 'yaml'"))
    }

    @Test("exec refuses a missing command and a variable it sets itself, before running anything")
    func execArguments() throws {
        let cli = try InProcessCLI()
        let noCommand = cli.run(["exec"])
        #expect(noCommand.exitCode == 2 && noCommand.stdout.isEmpty)
        #expect(
            noCommand.stderr
                == """
                portal-token: error: 'exec' needs a command to run\nhint: portal-token exec [--] COMMAND \
                [ARG...]\n
                """
        )
        let path = cli.run(["exec", "--token-var", "PATH", "--", "true"])
        #expect(path.exitCode == 2)
        #expect(
            path.stderr.hasPrefix("portal-token: error: --token-var cannot be PATH: COMMAND is looked up through it"))
        let badName = cli.run(["exec", "--token-var", "1X", "--", "true"])
        #expect(badName.exitCode == 2)
        #expect(badName.stderr.hasPrefix("portal-token: error: --token-var takes an environment variable name"))
    }

    @Test("exec-credential prints an ExecCredential with the token, and refuses input that is not JSON")
    func execCredential() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "tok-kube")
        let result = cli.run(["exec-credential"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(
            result.stdout.contains("\"kind\":\"ExecCredential\"")
                || result.stdout.contains("\"kind\": \"ExecCredential\""))
        #expect(result.stdout.contains("tok-kube"))
        let bad = cli.run(["exec-credential"], environment: ["KUBERNETES_EXEC_INFO": "{nope"])
        #expect(bad.exitCode == 2 && bad.stdout.isEmpty)
        #expect(bad.stderr == "portal-token: error: KUBERNETES_EXEC_INFO is not JSON\n")
    }

    // MARK: Storage and setup

    @Test("list shows stored credentials and the session, never a secret")
    func list() throws {
        let cli = try InProcessCLI()
        try cli.credentials.store(
            Credential(
                protocolName: "https", host: CredentialHost(gitHost: "git.example"),
                username: "alice", password: Secret("hunter2")))
        try cli.signIn(token: "tok-listed", endUserID: "user-3")
        let result = cli.run(["list"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(result.stdout.contains("git.example") && result.stdout.contains("alice"))
        #expect(result.stdout.contains("user-3"))
        #expect(!result.stdout.contains("hunter2") && !result.stdout.contains("tok-listed"))
    }

    @Test("setup-git takes only --unset")
    func setupGitArguments() throws {
        let result = try InProcessCLI().run(["setup-git", "--global"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("portal-token: error: unknown option '--global'"))
    }

    @Test("doctor refuses a format other than json")
    func doctorArguments() throws {
        let result = try InProcessCLI().run(["doctor", "--format", "xml"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("portal-token: error: "))
    }

    @Test("migrate needs --to, and only a backend's name")
    func migrateArguments() throws {
        let cli = try InProcessCLI()
        let none = cli.run(["migrate"])
        #expect(none.exitCode == 2 && none.stdout.isEmpty)
        #expect(
            none.stderr
                == """
                portal-token: error: 'migrate' needs --to secret-service, --to file or --to vault\nhint: see \
                'portal-token migrate --help'\n
                """
        )
        let wrong = cli.run(["migrate", "--to", "floppy"])
        #expect(wrong.exitCode == 2)
        #expect(wrong.stderr == "portal-token: error: --to must be secret-service, file or vault\n")
        let wrongSource = cli.run(["migrate", "--to", "file", "--from", "floppy"])
        #expect(wrongSource.exitCode == 2)
        #expect(wrongSource.stderr == "portal-token: error: --from must be secret-service, file or vault\n")
        let same = cli.run(["migrate", "--to", "vault", "--from", "vault"])
        #expect(same.exitCode == 2)
        #expect(same.stderr == "portal-token: error: --from and --to name the same store\n")
    }

    // MARK: Sign-in

    @Test("login needs a sign-in method, and --end-user is no method")
    func loginArguments() throws {
        let cli = try InProcessCLI()
        let none = cli.run(["login"])
        #expect(none.exitCode == 2 && none.stdout.isEmpty)
        #expect(
            none.stderr.hasPrefix(
                "portal-token: error: choose how to sign in: --email ADDRESS, --google, --apple or --with-token"))
        // --end-user is a setting like --env: it names the account, and is no sign-in method.
        let endUser = cli.run(["login", "--end-user", "u"])
        #expect(endUser.exitCode == 2)
        #expect(endUser.stderr.hasPrefix("portal-token: error: choose how to sign in"), "\(endUser.stderr)")
        let empty = cli.run(["login", "--with-token", "--end-user="], stdin: "tok\n")
        #expect(empty.exitCode == 2 && empty.stderr.hasPrefix("portal-token: error: --end-user needs an end user ID"))
    }

    @Test("login --with-token adopts the token on stdin after Portal accepts it")
    func loginWithToken() throws {
        let cli = try InProcessCLI(
            transport: ScriptedTransport { request throws(HTTPError) in
                HTTPResponse(
                    status: 200, body: Array(#"{"id":"client-1","endUser":{"id":"user-5"}}"#.utf8),
                    effectiveURL: request.url)
            })
        let result = cli.run(["login", "--with-token", "--end-user", "user-5"], stdin: "tok-adopted\n")
        #expect(result.exitCode == 0 && result.stdout.isEmpty)
        guard case .present(let session) = cli.storedSession else { Issue.record("no session stored"); return }
        #expect(session.token == Secret("tok-adopted") && session.endUserID == "user-5")
    }

    @Test(
        """
        login with a custom-scheme redirect URL is refused, in one line and before anything is sent, unless /proc \
        has hidepid or the risk is accepted, which warns; a loopback one never
        """)
    func loginRefusesCustomSchemeWithoutHidepid() throws {
        let environment = [
            "PORTAL_REDIRECT_URL": "portalexample://auth/callback",
            "PORTAL_MAGIC_LINK_FROM_EMAIL": "noreply@example.com", "PORTAL_MAGIC_LINK_TEMPLATE_ID": "template-1",
        ]
        let refusal =
            "portal-token: error: other local users can read command lines here (/proc is not mounted with hidepid)"
        let warning =
            "portal-token: warning: other local users can read command lines here (/proc is not mounted with hidepid)"
        let proc = "22 21 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw"
        for mountInfo in [proc, nil] {
            let transport = ScriptedTransport(status: 200, json: "{}")
            let cli = try InProcessCLI(transport: transport)
            cli.procMountInfo = mountInfo
            let login = cli.run(["login", "--email", "user@example.com"], environment: environment)
            #expect(login.exitCode == 2, "\(login.stderr)")
            let lines = login.stderr.split(separator: "\n")
            #expect(lines.filter { $0.hasPrefix(refusal) }.count == 1, "\(login.stderr)")
            #expect(lines.contains { $0.hasPrefix("hint: register a loopback redirect URL") })
            #expect(!login.stderr.contains("user@example.com") && !login.stderr.contains("portalexample://"))
            #expect(transport.requests.isEmpty)

            let accepted = try InProcessCLI(transport: ScriptedTransport(status: 200, json: "{}"))
            accepted.procMountInfo = mountInfo
            let warned = accepted.run(
                ["login", "--email", "user@example.com"],
                environment: environment.merging(["PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK": "true"]) { $1 })
            #expect(warned.exitCode == 0, "\(warned.stderr)")
            let warnings = warned.stderr.split(separator: "\n").filter { $0.hasPrefix(warning) }
            #expect(warnings.count == 1, "\(warned.stderr)")
            #expect(
                warnings.first?.hasSuffix(
                    "prefer a loopback redirect URL, http://127.0.0.1:PORT/path, registered in Portal's dashboard")
                    == true)
        }
        let hidden = try InProcessCLI(transport: ScriptedTransport(status: 200, json: "{}"))
        hidden.procMountInfo = proc + ",hidepid=invisible"
        let quiet = hidden.run(["login", "--email", "user@example.com"], environment: environment)
        #expect(quiet.exitCode == 0 && !quiet.stderr.contains("warning"), "\(quiet.stderr)")
        // A loopback redirect URL involves no launcher: no refusal (the fake listener fails, exit 5).
        let loopback = try InProcessCLI(transport: ScriptedTransport(status: 200, json: "{}"))
        let listened = loopback.run(
            ["login", "--email", "user@example.com"],
            environment: environment.merging(["PORTAL_REDIRECT_URL": "http://127.0.0.1:8765/callback"]) { $1 })
        #expect(listened.exitCode != 0 && !listened.stderr.contains("hidepid"), "\(listened.stderr)")
    }

    @Test("redirect needs the URL")
    func redirectArguments() throws {
        let result = try InProcessCLI().run(["redirect"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(
            result.stderr
                == """
                portal-token: error: 'redirect' needs the URL the browser was sent to\nhint: see 'portal-token \
                redirect --help'\n
                """
        )
    }

    @Test("verify-totp with nothing waiting says so (exit 1) and sends nothing")
    func verifyTOTP() throws {
        let cli = try InProcessCLI()
        let result = cli.run(["verify-totp", "123456"])
        #expect(result.exitCode == 1 && result.stdout.isEmpty)
        #expect(
            result.stderr
                == """
                portal-token: error: no two-factor step is waiting for environment 'env-1'\nhint: sign in with \
                'portal-token login'\n
                """
        )
        #expect(cli.transport.requests.isEmpty)
    }

    @Test("methods refuses a format other than json")
    func methodsArguments() throws {
        let result = try InProcessCLI().run(["methods", "--format", "text"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr == "portal-token: error: --format takes only json, not 'text'\n")
    }

    // MARK: The session

    @Test("status shows the signed-in end user and the backend, never the token")
    func status() throws {
        let cli = try InProcessCLI()
        let out = cli.run(["status"])
        #expect(out.exitCode == 1)
        try cli.signIn(token: "tok-status", endUserID: "user-4")
        let result = cli.run(["status"])
        #expect(result.exitCode == 0)
        #expect(result.stdout.contains("user-4") && result.stdout.contains("file"))
        #expect(!result.stdout.contains("tok-status") && !result.stderr.contains("tok-status"))
    }

    @Test("refresh when not signed in is exit 1 and sends nothing")
    func refreshSignedOut() throws {
        let cli = try InProcessCLI()
        let result = cli.run(["refresh"])
        #expect(result.exitCode == 1 && result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("portal-token: error: "))
        #expect(cli.transport.requests.isEmpty)
    }

    @Test("api sends the request with the session's bearer and prints Portal's body")
    func api() throws {
        let cli = try InProcessCLI(
            transport: ScriptedTransport { request throws(HTTPError) in
                HTTPResponse(status: 200, body: Array(#"{"ok":true}"#.utf8), effectiveURL: request.url)
            })
        try cli.signIn(token: "tok-api")
        let result = cli.run(["api", "/api/v3/clients/me"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(result.stdout.contains(#"{"ok":true}"#))
        let sent = try #require(cli.transport.requests.last)
        #expect(sent.url == "https://api.portalhq.io/api/v3/clients/me")
        #expect(sent.authorization == Secret("Bearer tok-api"))
        let noPath = cli.run(["api"])
        #expect(noPath.exitCode == 2)
        #expect(noPath.stderr == "portal-token: error: 'api' needs a PATH\nhint: see 'portal-token api --help'\n")
    }

    @Test("logout removes the session")
    func logout() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        let result = cli.run(["logout"])
        #expect(result.exitCode == 0 && result.stdout.isEmpty)
        #expect(cli.storedSession == .absent)
    }

    @Test("lock drops every cached key and session copy, and nothing else, reading no store")
    func lock() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        #expect(cli.run(["token"]).exitCode == 0)
        cli.cache.store(Secret("key"), as: "portal-token:file-key:0123", forSeconds: 60)
        cli.cache.store(Secret("kept"), as: "portal-tokens-of-another-tool", forSeconds: 60)
        #expect(cli.cache.names.count == 3)
        let searches = cli.items.searches.withLock { $0 }
        let result = cli.run(["lock"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(result.exitCode == 0 && result.stdout.isEmpty, "\(result.stderr)")
        #expect(
            result.stderr
                == "portal-token: dropped every cached key and session copy; the next command reads the store again\n")
        #expect(cli.cache.names == ["portal-tokens-of-another-tool"])
        #expect(cli.items.searches.withLock { $0 } == searches)
        // The session is still stored: the next read finds it there.
        #expect(cli.run(["token"]).stdout == "token-1\n")
    }

    @Test("key-cache-max must be a whole number of seconds; the session copy is kept no longer")
    func keyCacheMax() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        let bad = cli.run(["token"], environment: ["PORTAL_TOKEN_KEY_CACHE_MAX": "2h"])
        #expect(bad.exitCode == 2)
        #expect(
            bad.stderr.hasPrefix("portal-token: error: PORTAL_TOKEN_KEY_CACHE_MAX must be a whole number of seconds"))
        #expect(cli.run(["token"], environment: ["PORTAL_TOKEN_KEY_CACHE_MAX": "30"]).exitCode == 0)
        let name = try #require(cli.cache.names.first)
        #expect(cli.cache.maximumLifetime(of: name) == 30)
        #expect(cli.cache.lifetime(of: name) == 30)
    }

    // MARK: Help and version

    @Test("--version prints the version on stdout")
    func version() throws {
        let result = try InProcessCLI().run(["--version"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        #expect(result.stdout == "portal-token \(Release.version)\n")
        // `version` is a command too, and prints the same line whatever the config file holds.
        let command = try InProcessCLI().run(["version"], environment: ["PORTAL_TOKEN_CONFIG": "/nonexistent/config"])
        #expect(command.exitCode == 0 && command.stderr.isEmpty, "\(command.stderr)")
        #expect(command.stdout == result.stdout)
    }

    @Test(
        "help lists every command, and each command has its own help",
        arguments: [
            "get", "store", "erase", "capability", "token", "exec", "exec-credential", "list", "setup-git",
            "doctor", "methods", "login", "redirect", "verify-totp", "status", "refresh", "api", "logout", "migrate",
            "lock", "unlock", "version",
        ])
    func help(command: String) throws {
        let cli = try InProcessCLI()
        for overview in [cli.run(["--help"]), cli.run(["help"])] {
            #expect(overview.exitCode == 0 && overview.stderr.isEmpty)
            #expect(overview.stdout.contains("  \(command) "))
        }
        for own in [cli.run([command, "--help"]), cli.run(["help", command])] {
            #expect(own.exitCode == 0 && own.stderr.isEmpty)
            #expect(own.stdout.hasPrefix("usage: portal-token \(command)"))
        }
    }
}
