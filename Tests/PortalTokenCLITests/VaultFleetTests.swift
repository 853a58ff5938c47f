import Foundation
import PortalTokenTestSupport
import Testing

/// Several hosts sharing one Portal session through the Vault store on the suite's real OpenBao
/// server: each "host" is a HOME, runtime directory and store lock of its own, so only the
/// server's check-and-set orders their writes (docs/storage.md, "Vault / OpenBao").
@Suite("fleet sessions in the Vault store")
struct VaultFleetTests {
    /// The harness's environment as seen by `count` hosts of their own.
    static func hosts(_ portal: PortalHarness, count: Int) throws -> [[String: String]] {
        try (0..<count).map { index in
            let home = portal.git.directory.appendingPathComponent("host-\(index)")
            let run = home.appendingPathComponent("run")
            try FileManager.default.createDirectory(
                at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var environment = portal.git.environment
            environment["HOME"] = home.path
            environment["XDG_RUNTIME_DIR"] = run.path
            environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
            environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
            environment["XDG_STATE_HOME"] = home.appendingPathComponent(".local/state").path
            return environment
        }
    }

    /// A harness whose Vault store lies under `prefix` on the suite's OpenBao server.
    static func fleetHarness(prefix: String = OpenBaoServer.freshPrefix()) throws -> PortalHarness {
        try PortalHarness(backend: .file, extraEnvironment: try OpenBaoServer.environment(prefix: prefix))
    }

    /// A harness under a fresh prefix, signed in with `token`; the prefix, and one host's environment.
    static func signedInHost(
        _ token: String
    ) throws -> (portal: PortalHarness, prefix: String, host: [String: String]) {
        let prefix = OpenBaoServer.freshPrefix()
        let portal = try fleetHarness(prefix: prefix)
        #expect(try portal.adopt(token: token).exitCode == 0)
        return (portal, prefix, try hosts(portal, count: 1)[0])
    }

    /// `portal-token token` on `host`, which must print `expected`.
    @discardableResult
    static func expectToken(
        _ expected: String, on host: [String: String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ProcessResult {
        let token = try ProcessRunner.portalToken(["token"], environment: host)
        #expect(
            token.exitCode == 0 && token.stdout == expected + "\n", "\(token.stderr)", sourceLocation: sourceLocation)
        return token
    }

    @Test("a session adopted on one host is served on the others, and a logout on one ends it for all")
    func sharedSession() throws {
        let portal = try Self.fleetHarness()
        let hosts = try Self.hosts(portal, count: 3)
        let adopted = try ProcessRunner.portalToken(
            ["store"], stdin: portal.portalOrigin + "username=user-1\npassword=token-F\n", environment: hosts[0])
        #expect(adopted.exitCode == 0 && adopted.stderr.isEmpty, "\(adopted.stderr)")
        for host in hosts { try Self.expectToken("token-F", on: host) }
        #expect(try ProcessRunner.portalToken(["logout"], environment: hosts[2]).exitCode == 0)
        #expect(try ProcessRunner.portalToken(["token"], environment: hosts[1]).exitCode == 1)
        #expect(portal.hookRuns.isEmpty)
    }

    @Test("three hosts seeing the 401 at once, four processes each, run the hook once in all")
    func concurrentUnauthorizedAcrossHosts() throws {
        let portal = try Self.fleetHarness()
        let hosts = try Self.hosts(portal, count: 3)
        #expect(
            try ProcessRunner.portalToken(
                ["store"], stdin: portal.portalOrigin + "username=user-1\npassword=token-dead\n",
                environment: hosts[0]
            ).exitCode == 0)
        let processes = 12
        // Portal holds every answer until all requests are in, so every process sees the 401.
        let arrived = portal.server.holdUnauthorized(until: processes)
        let codes = try concurrently(processes) { index in
            try ProcessRunner.portalToken(["refresh"], environment: hosts[index % hosts.count]).exitCode
        }
        #expect(arrived.value == processes)
        #expect(codes.allSatisfy { $0 == 3 }, "exit codes: \(codes)")
        #expect(portal.hookRuns == ["unauthorized user-1 \(portal.environmentID)"])
        for host in hosts { #expect(try ProcessRunner.portalToken(["token"], environment: host).exitCode == 1) }
    }

    @Test("a host serves the session from its copy, then with one request, and sees another host's change")
    func sessionCopyOnAHost() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let portal = try Self.fleetHarness(prefix: prefix)
        let hosts = try Self.hosts(portal, count: 2)
        var host = hosts[0]
        host["PORTAL_TOKEN_VAULT_CACHE_SECONDS"] = "3"
        let other = hosts[1]
        // Each host with a kernel keyring of its own, as two machines have.
        let hostKeyring = try PrivateUserKeyring()
        let otherKeyring = try PrivateUserKeyring()
        /// The requests the server saw while `body` ran.
        func requests(_ body: () throws -> Void) throws -> [OpenBaoServer.AuditedRequest] {
            let before = try OpenBaoServer.auditedRequests(containing: prefix).count
            try body()
            return Array(try OpenBaoServer.auditedRequests(containing: prefix).dropFirst(before))
        }
        func token(_ expected: String) throws {
            let token = try hostKeyring.portalToken(["token"], environment: host)
            #expect(token.exitCode == 0 && token.stdout == expected + "\n", "\(token.stderr)")
        }
        let adopt = portal.portalOrigin + "username=user-1\npassword="
        #expect(try otherKeyring.portalToken(["store"], stdin: adopt + "token-1\n", environment: other).exitCode == 0)

        // Cold: a search, three requests over one connection.
        let cold = try requests { try token("token-1") }
        #expect(cold.map(\.operation) == ["list", "read", "read"], "\(cold)")
        #expect(Set(cold.map(\.remotePort)).count == 1, "\(cold)")
        let kept = ProcessRunner.monotonicSeconds()
        // Warm: nothing asked of the server.
        #expect(try requests { try token("token-1") }.isEmpty)

        // Another host replaces the session; past the copy's 3 s, one read of its key finds it.
        #expect(try otherKeyring.portalToken(["store"], stdin: adopt + "token-2\n", environment: other).exitCode == 0)
        usleep(useconds_t(max(0, kept + 3.5 - ProcessRunner.monotonicSeconds()) * 1_000_000))
        let recheck = try requests { try token("token-2") }
        #expect(recheck.map(\.operation) == ["read"], "\(recheck)")
        #expect(recheck.first?.path.contains("/data/\(prefix)/io.portalhq.PortalToken.Session/") == true)
        let rechecked = ProcessRunner.monotonicSeconds()

        // Another host ends it; past the copy, this host sees that it has ended.
        #expect(try otherKeyring.portalToken(["logout"], environment: other).exitCode == 0)
        usleep(useconds_t(max(0, rechecked + 3.5 - ProcessRunner.monotonicSeconds()) * 1_000_000))
        let ended = try hostKeyring.portalToken(["token"], environment: host)
        #expect(ended.exitCode == 1 && ended.stdout.isEmpty, "\(ended.stdout) \(ended.stderr)")
        #expect(portal.hookRuns.isEmpty)
    }

    @Test("a host logs in with its AppRole role ID setting and secret ID file, and serves the session")
    func appRoleHost() throws {
        let (portal, prefix, first) = try Self.signedInHost("token-A")
        let role = try OpenBaoServer.appRole(
            policy: OpenBaoServer.readWritePolicy(prefix: prefix), directory: portal.git.directory)
        var host = first
        host["PORTAL_TOKEN_VAULT_TOKEN_FILE"] = nil
        host["PORTAL_TOKEN_VAULT_ROLE_ID"] = role.roleID
        host["PORTAL_TOKEN_VAULT_SECRET_ID_FILE"] = role.secretIDFile
        let token = try Self.expectToken("token-A", on: host)
        #expect(!token.stderr.contains(role.roleID))
        // Its writes go through under the role's policy: a logout there ends the session for all.
        #expect(try ProcessRunner.portalToken(["logout"], environment: host).exitCode == 0)
        #expect(try portal.git.portalToken(["token"]).exitCode == 1)
    }

    @Test("migrate moves a host's file store into the Vault store, and --from vault moves it back")
    func migrateFileIntoVaultAndBack() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let portal = try Self.fleetHarness(prefix: prefix)
        var file = portal.git.environment
        file["PORTAL_TOKEN_BACKEND"] = "file"
        var vault = portal.git.environment
        vault["PORTAL_TOKEN_BACKEND"] = "vault"
        let credential = "protocol=https\nhost=m.tld\nusername=u\npassword=moved-secret\n"
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: file).exitCode == 0)
        #expect(
            try ProcessRunner.portalToken(
                ["store"], stdin: portal.portalOrigin + "username=user-1\npassword=token-M\n", environment: file
            ).exitCode == 0)
        #expect(try ProcessRunner.portalToken(["token"], environment: vault).exitCode == 1)

        let there = try ProcessRunner.portalToken(["migrate", "--to", "vault"], environment: vault)
        #expect(there.exitCode == 0, "\(there.stderr)")
        #expect(there.stderr.contains("portal-token: moved 2 items to the vault store; moved the encrypted file aside"))
        #expect(!there.stderr.contains("moved-secret") && !there.stderr.contains("token-M"))
        #expect(try ProcessRunner.portalToken(["token"], environment: vault).stdout == "token-M\n")
        #expect(
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=m.tld\n", environment: vault).stdout
                == "username=u\npassword=moved-secret\n")
        #expect(try ProcessRunner.portalToken(["token"], environment: file).exitCode == 1)

        let back = try ProcessRunner.portalToken(["migrate", "--from", "vault", "--to", "file"], environment: file)
        #expect(back.exitCode == 0, "\(back.stderr)")
        #expect(
            back.stderr.contains(
                "portal-token: moved 2 items to the file store; deleted 2 items from the Vault store"),
            "\(back.stderr)")
        #expect(try ProcessRunner.portalToken(["token"], environment: file).stdout == "token-M\n")
        #expect(
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=m.tld\n", environment: file).stdout
                == "username=u\npassword=moved-secret\n")
        #expect(try ProcessRunner.portalToken(["token"], environment: vault).exitCode == 1)
        #expect(
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=m.tld\n", environment: vault).stdout
                .isEmpty)
    }

    @Test("a host whose token only reads serves the session, is refused a write by path, and a revoked token says so")
    func readOnlyHost() throws {
        let (portal, prefix, host) = try Self.signedInHost("token-R")
        let tokenFile = try OpenBaoServer.tokenFile(
            policy: OpenBaoServer.readOnlyPolicy(prefix: prefix), directory: portal.git.directory)
        var reader = host
        reader["PORTAL_TOKEN_VAULT_TOKEN_FILE"] = tokenFile
        // Every command asks the server: a copy would answer for its lifetime after the revocation.
        reader["PORTAL_TOKEN_VAULT_CACHE_SECONDS"] = "0"
        try Self.expectToken("token-R", on: reader)
        let store = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=refused.example\nusername=u\npassword=secret-pw\n",
            environment: reader)
        #expect(store.exitCode == 4)
        #expect(store.stderr.contains("permission denied by policy for secret/"), "\(store.stderr)")
        #expect(store.stderr.contains("/\(prefix)/org.git.Password/"))
        #expect(!store.stderr.contains("secret-pw"))
        try OpenBaoServer.revoke(tokenFile: tokenFile)
        let revoked = try ProcessRunner.portalToken(["token"], environment: reader)
        #expect(revoked.exitCode == 4)
        #expect(revoked.stderr.contains("expired, revoked or unknown") && revoked.stderr.contains("hint:"))
    }

    @Test(
        """
        an AppRole host logs in once for many runs, and again once the kept token is refused: a secret ID good \
        for two logins serves six runs
        """)
    func appRoleLoginKept() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let portal = try PortalHarness(backend: .file, extraEnvironment: try OpenBaoServer.environment(prefix: prefix))
        #expect(try portal.adopt(token: "token-K").exitCode == 0)
        let role = try OpenBaoServer.appRole(
            policy: OpenBaoServer.readWritePolicy(prefix: prefix), directory: portal.git.directory, secretIDUses: 2)
        var host = try Self.hosts(portal, count: 1)[0]
        host["PORTAL_TOKEN_VAULT_TOKEN_FILE"] = nil
        host["PORTAL_TOKEN_VAULT_ROLE_ID"] = role.roleID
        host["PORTAL_TOKEN_VAULT_SECRET_ID_FILE"] = role.secretIDFile
        // No session copy answers for the server: every run reads the session there.
        host["PORTAL_TOKEN_VAULT_CACHE_SECONDS"] = "0"
        for run in 1...5 {
            let token = try ProcessRunner.portalToken(["token"], environment: host)
            #expect(token.exitCode == 0 && token.stdout == "token-K\n", "run \(run): \(token.stderr)")
        }
        // The kept login is named by a digest: the kernel keyring's listing shows no role ID.
        let names = try KernelKeys.names(environment: host)
        #expect(names.contains { $0.hasPrefix("portal-token:vault-login:") }, "\(names)")
        #expect(!names.contains { $0.contains(role.roleID) })
        // Every AppRole login's token revoked, as an administrator would: the next run is refused
        // with the kept token, drops it, and logs in again (the secret ID's second use).
        _ = try OpenBaoServer.bao(["lease", "revoke", "-prefix", "auth/approle/login"])
        let again = try ProcessRunner.portalToken(["token"], environment: host)
        #expect(again.exitCode == 0 && again.stdout == "token-K\n", "\(again.stderr)")
        // Without the kept login (no key cache), the next run needs a third login, which the
        // spent secret ID refuses.
        host["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "0"
        let uncached = try ProcessRunner.portalToken(["token"], environment: host)
        #expect(uncached.exitCode == 4 && uncached.stderr.contains("AppRole login"), "\(uncached.stderr)")
    }
}

/// `concurrently` with each body told its index.
private func concurrently<Result: Sendable>(
    _ count: Int, _ body: @escaping @Sendable (Int) throws -> Result
) throws -> [Result] {
    let next = Locked(0)
    return try concurrently(count) { () throws -> Result in
        let index = next.update { value -> Int in
            defer { value += 1 }
            return value
        }
        return try body(index)
    }
}
