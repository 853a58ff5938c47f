import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

@testable import Commands
@testable import Operations

/// The account a sign-in signed in is remembered, so that a new shell with no Portal variables
/// acts for it; several are never chosen between behind the user's back (docs/sessions.md,
/// "Remembered accounts").
@Suite("remembered accounts")
struct RememberedAccountTests {
    static let accepted = ScriptedTransport { request throws(HTTPError) in
        HTTPResponse(
            status: 200, body: Array(#"{"id":"client-1","endUser":{"id":"user-5"}}"#.utf8), effectiveURL: request.url)
    }

    var accountsPath: (InProcessCLI) -> String = { $0.directory + "/config/portal-token/accounts.json" }

    @Test("after login --with-token, a shell with no Portal variables gets the token, status names the account and why")
    func rememberedAfterSignIn() throws {
        let cli = try InProcessCLI(transport: Self.accepted)
        let login = cli.run(
            ["login", "--with-token", "--end-user", "user-5"], stdin: "tok-remembered\n",
            environment: ["PORTAL_API_HOST": "127.0.0.1:8443"])
        #expect(login.exitCode == 0, "\(login.stderr)")
        let file = try String(contentsOfFile: accountsPath(cli), encoding: .utf8)
        #expect(!file.contains("tok-remembered"), "a secret in the accounts file")
        #expect(file.contains(#""authEnvironmentId":"env-1""#) && file.contains(#""apiHost":"127.0.0.1:8443""#))
        var mode = stat()
        stat(accountsPath(cli), &mode)
        #expect(mode.st_mode & 0o077 == 0)

        let token = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(token.exitCode == 0, "\(token.stderr)")
        #expect(token.stdout == "tok-remembered\n")
        let status = cli.run(["status"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(status.exitCode == 0, "\(status.stderr)")
        #expect(status.stdout.contains("signed in as user-5"))
        #expect(status.stdout.contains("  environment:  env-1"))
        #expect(status.stdout.contains("  chosen by:    the one account signed in on this machine, remembered in"))
        // The remembered API host is the one the session is sent to.
        let refresh = cli.run(["refresh"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(refresh.exitCode == 0, "\(refresh.stderr)")
        #expect(cli.transport.requests.last?.url.hasPrefix("http://127.0.0.1:8443/") == true)

        // A logout forgets it: a new shell then says nothing is signed in here.
        let logout = cli.run(["logout"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(logout.exitCode == 0, "\(logout.stderr)")
        let after = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(after.exitCode == 2)
        #expect(
            after.stderr.hasPrefix("portal-token: error: no auth environment ID is set, and no account is signed in"))
    }

    @Test("two accounts remembered and none named: exit 2 listing both; naming one chooses it, in that run only")
    func severalAreListed() throws {
        let cli = try InProcessCLI(transport: Self.accepted)
        for environment in ["env-1", "env-2"] {
            let login = cli.run(
                ["login", "--with-token", "--end-user", "user-5"], stdin: "tok-\(environment)\n",
                environment: ["PORTAL_AUTH_ENVIRONMENT_ID": environment])
            #expect(login.exitCode == 0, "\(login.stderr)")
        }
        let unnamed = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(unnamed.exitCode == 2 && unnamed.stdout.isEmpty)
        #expect(
            unnamed.stderr.hasPrefix(
                "portal-token: error: 2 accounts are signed in on this machine and none is chosen: "
                    + "'env-1' (end user user-5), 'env-2' (end user user-5)"), "\(unnamed.stderr)")
        #expect(
            unnamed.stderr.contains(
                "hint: choose one with --env ID (and --end-user ID), bind this directory with "
                    + "'portal-token accounts use"), "\(unnamed.stderr)")
        let named = cli.run(["--env", "env-2", "token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(named.exitCode == 0 && named.stdout == "tok-env-2\n", "\(named.stderr)")
        // Choosing in one run changed nothing for the next.
        #expect(cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"]).exitCode == 2)
    }

    @Test("nothing remembered and one session stored: that session answers, and status says why")
    func oneStoredSession() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "tok-stored", endUserID: "user-9")
        let token = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(token.exitCode == 0 && token.stdout == "tok-stored\n", "\(token.stderr)")
        let status = cli.run(["status"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(status.stdout.contains("  chosen by:    the one session stored in"), "\(status.stdout)")
    }

    @Test("a damaged accounts file is a clear error naming it, is left as it was, and --env still works")
    func damagedFile() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "tok-damaged")
        try FileManager.default.createDirectory(
            atPath: cli.directory + "/config/portal-token", withIntermediateDirectories: true)
        let damaged = Data(#"{"version":1,"accounts":[{"endUserId":"u"}"#.utf8)
        try damaged.write(to: URL(fileURLWithPath: accountsPath(cli)))
        chmod(accountsPath(cli), 0o600)
        let token = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(token.exitCode == 2 && token.stdout.isEmpty)
        #expect(token.stderr.hasPrefix("portal-token: error: cannot use the accounts file \(accountsPath(cli)): "))
        #expect(try Data(contentsOf: URL(fileURLWithPath: accountsPath(cli))) == damaged)
        let named = cli.run(["token"])
        #expect(named.exitCode == 0 && named.stdout == "tok-damaged\n", "\(named.stderr)")
        // One that others may write could name another API host: refused, not read.
        try Data(#"{"version":1,"accounts":[]}"#.utf8).write(to: URL(fileURLWithPath: accountsPath(cli)))
        chmod(accountsPath(cli), 0o666)
        let open = cli.run(["token"], unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
        #expect(open.exitCode == 2)
        #expect(open.stderr.contains("writable by other users"), "\(open.stderr)")
    }

    @Test(
        """
        the accounts file codec: entries and directory bindings round-trip, one per environment and end user, a \
        sign-in replaces its own; the deepest binding covers a directory
        """)
    func codec() throws {
        let first = RememberedAccount(authEnvironmentID: "a", endUserID: "u1", apiHost: nil)
        let second = RememberedAccount(authEnvironmentID: "b", endUserID: "u2", apiHost: "staging.example")
        var file = RememberedAccounts().recording(first).recording(second)
        #expect(try RememberedAccounts.decode(file.encode()) == file)
        // The same end user again replaces its entry in place; another end user of "a" is added.
        let again = RememberedAccount(authEnvironmentID: "a", endUserID: "u1", apiHost: "x.example")
        let other = RememberedAccount(authEnvironmentID: "a", endUserID: "u3", apiHost: nil)
        file = file.recording(again).recording(other)
        #expect(file.accounts == [again, second, other])
        #expect(file.accounts(of: "a") == [again, other])
        #expect(file.forgetting("a", endUserID: "u3").accounts == [again, second])
        #expect(file.forgetting("a", endUserID: nil).accounts == [second])
        file = file.binding(
            "/work/repo", to: DirectoryAccount(path: "/work/repo", authEnvironmentID: "a", endUserID: "u1")
        )
        .binding("/work/repo/sub", to: DirectoryAccount(path: "/work/repo/sub", authEnvironmentID: "b", endUserID: nil))
        #expect(try RememberedAccounts.decode(file.encode()) == file)
        #expect(file.directoryAccount(for: "/work/repo")?.authEnvironmentID == "a")
        #expect(file.directoryAccount(for: "/work/repo/x/y")?.authEnvironmentID == "a")
        #expect(file.directoryAccount(for: "/work/repo/sub/z")?.authEnvironmentID == "b")
        #expect(file.directoryAccount(for: "/work/repository") == nil, "a name that only starts alike is not below")
        #expect(file.directoryAccount(for: "/work") == nil)
        #expect(
            file.binding("/work/repo/sub", to: nil).directoryAccount(for: "/work/repo/sub")?.authEnvironmentID == "a")
        for damaged in [
            "", "[]", #"{"version":2,"accounts":[]}"#, #"{"version":1}"#,
            #"{"version":1,"accounts":[{"authEnvironmentId":"a","endUserId":"u","apiHost":5}]}"#,
            #"{"version":1,"accounts":[],"directories":[{"path":"relative","authEnvironmentId":"a"}]}"#,
            #"{"version":1,"accounts":[],"directories":[{"path":"/x","authEnvironmentId":"a","endUserId":7}]}"#,
        ] {
            #expect(throws: RememberedAccounts.DecodingError.self, "\(damaged)") {
                try RememberedAccounts.decode(Array(damaged.utf8))
            }
        }
    }
}
