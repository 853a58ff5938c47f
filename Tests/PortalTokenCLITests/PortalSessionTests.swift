import Foundation
import PortalTokenTestSupport
import Testing

private let hour: Int64 = 3600

/// A harness on `backend` signed in with `token`; with `live`, the fake Portal takes the token as live.
private func signedIn(
    _ backend: TestBackend, _ token: String, live: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
) throws -> PortalHarness {
    let portal = try PortalHarness(backend: backend)
    if live { portal.server.registerLiveToken(token) }
    #expect(try portal.adopt(token: token).exitCode == 0, sourceLocation: sourceLocation)
    return portal
}

/// Portal sessions end to end: the binary, a real store, real git, and the fake Portal server.
@Suite("Portal sessions")
struct PortalSessionTests {
    @Test(
        "a new user adopts a token, gets it, sees the status, and a 401 ends it with one hook run",
        arguments: TestBackend.allCases)
    func newUserFlow(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        portal.server.registerLiveToken("token-T")
        let adopted = try portal.adopt(token: "token-T", endUserID: "U")
        #expect(adopted.exitCode == 0 && adopted.stdout.isEmpty)

        let get = try portal.git.portalToken(["get"])
        #expect(get.exitCode == 0)
        #expect(get.stdout == "token-T\n")

        let status = try portal.git.portalToken(["status"])
        #expect(status.exitCode == 0)
        #expect(status.stdout.contains("signed in as U"))
        #expect(status.stdout.contains("expires at:"))
        #expect(!status.stdout.contains("token-T") && !status.stderr.contains("token-T"))

        let json = try portal.git.portalToken(["status", "--format", "json"])
        #expect(json.stdout.contains("\"endUserId\":\"U\"") && json.stdout.contains("\"signedIn\":true"))
        #expect(!json.stdout.contains("token-T"))

        #expect(try portal.git.portalToken(["refresh"]).exitCode == 0)
        portal.server.revoke("token-T")
        let refresh = try portal.git.portalToken(["refresh"])
        #expect(refresh.exitCode == 3)
        #expect(refresh.stderr.contains("portal-token: error: the Portal session of U has ended"))
        #expect(portal.hookRuns == ["unauthorized U \(portal.environmentID)"])
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
        #expect(portal.server.violations.isEmpty, "\(portal.server.violations)")
    }

    @Test(
        "get --format json prints token, endUserId, authEnvironmentId and an RFC 3339 expiresAt",
        arguments: TestBackend.allCases)
    func scriptModeJSON(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-J")
        let result = try portal.git.portalToken(["get", "--format", "json"])
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: String]
        #expect(object?["token"] == "token-J")
        #expect(object?["endUserId"] == "user-1")
        #expect(object?["authEnvironmentId"] == portal.environmentID)
        #expect(object?["expiresAt"]?.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/) != nil)
    }

    @Test(
        "23 h after the last activity the token is handed out with no request to Portal",
        arguments: TestBackend.allCases)
    func withinIdleWindow(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-23")
        let result = try portal.portalToken(["get"], clockShift: 23 * hour)
        #expect(result.exitCode == 0 && result.stdout == "token-23\n")
        #expect(portal.server.requests.isEmpty)
    }

    @Test(
        "25 h after, a live token is checked once, handed out, and its expiry slides",
        arguments: TestBackend.allCases)
    func pastIdleWindowLive(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-25", live: true)
        let result = try portal.portalToken(["get"], clockShift: 25 * hour)
        #expect(result.exitCode == 0 && result.stdout == "token-25\n")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
        // The slid expiry: 47 h after adoption (22 h after the check) needs no second request.
        let later = try portal.portalToken(["get"], clockShift: 47 * hour)
        #expect(later.exitCode == 0 && later.stdout == "token-25\n")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
        #expect(portal.hookRuns.isEmpty)
    }

    @Test(
        "25 h after, a revoked token ends the session: exit 3, hook once, reason unauthorized",
        arguments: TestBackend.allCases)
    func pastIdleWindowRevoked(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-revoked")
        let result = try portal.portalToken(["get"], clockShift: 25 * hour)
        #expect(result.exitCode == 3 && result.stdout.isEmpty)
        #expect(portal.hookRuns == ["unauthorized user-1 \(portal.environmentID)"])
        let again = try portal.portalToken(["get"], clockShift: 25 * hour)
        #expect(again.exitCode == 1)
        #expect(portal.hookRuns.count == 1)
    }

    @Test(
        "past the idle window with Portal unreachable: exit 5 and the session is kept",
        arguments: TestBackend.allCases)
    func pastIdleWindowUnreachable(backend: TestBackend) throws {
        let refusing = try RefusingPort()
        let portal = try PortalHarness(
            backend: backend, extraEnvironment: ["PORTAL_API_HOST": "127.0.0.1:\(refusing.port)"])
        let origin = "protocol=http\nhost=127.0.0.1:\(refusing.port)\n"
        #expect(
            try portal.git.portalToken(["store"], stdin: origin + "username=user-1\npassword=token-kept\n").exitCode
                == 0)
        let result = try portal.portalToken(["get"], clockShift: 25 * hour)
        #expect(result.exitCode == 5)
        #expect(result.stdout.isEmpty)
        #expect(try portal.git.portalToken(["get"]).stdout == "token-kept\n")
        #expect(portal.hookRuns.isEmpty)
    }

    @Test(
        "at 7 days the session ends locally: exit 3, reason expired, no request",
        arguments: TestBackend.allCases)
    func sevenDayCap(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-7d", live: true)
        let result = try portal.portalToken(["get"], clockShift: 7 * 24 * hour)
        #expect(result.exitCode == 3)
        #expect(result.stderr.contains("reached its 7-day limit"))
        #expect(portal.server.requests.isEmpty)
        #expect(portal.hookRuns == ["expired user-1 \(portal.environmentID)"])
    }

    @Test("20 processes seeing the 401 at once run the hook once", arguments: TestBackend.allCases)
    func concurrentUnauthorized(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-dead")
        // Portal holds every answer until all 20 requests are in, so all 20 processes see the 401.
        let arrived = portal.server.holdUnauthorized(until: 20)
        let codes = try concurrently(20) { try portal.git.portalToken(["refresh"]).exitCode }
        #expect(arrived.value == 20)
        #expect(codes.allSatisfy { $0 == 3 }, "exit codes: \(codes)")
        #expect(portal.hookRuns.count == 1)
    }

    @Test(
        "20 concurrent git erasers of the session's token run the hook once",
        arguments: TestBackend.allCases, RealGit.allCases)
    func concurrentErasers(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        #expect(try portal.adopt(token: "token-erased").exitCode == 0)
        let codes = try concurrently(20) {
            try portal.git.credential("reject", portal.portalOrigin + "username=user-1\npassword=token-erased\n")
                .exitCode
        }
        #expect(codes.allSatisfy { $0 == 0 }, "git reject exit codes: \(codes)")
        #expect(portal.hookRuns == ["unauthorized user-1 \(portal.environmentID)"])
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
    }

    @Test(
        "erase without a password removes without the hook; with another password changes nothing",
        arguments: TestBackend.allCases)
    func eraseVariants(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-E")
        let other = try portal.git.portalToken(["erase"], stdin: portal.portalOrigin + "password=older-token\n")
        #expect(other.exitCode == 0)
        #expect(try portal.git.portalToken(["get"]).stdout == "token-E\n")
        let matching = try portal.git.portalToken(["erase"], stdin: portal.portalOrigin + "password=token-E\n")
        #expect(matching.exitCode == 3)
        #expect(portal.hookRuns.count == 1)
        #expect(try portal.adopt(token: "token-F").exitCode == 0)
        let plain = try portal.git.portalToken(["erase"], stdin: portal.portalOrigin)
        #expect(plain.exitCode == 0)
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
        #expect(portal.hookRuns.count == 1)
        #expect(try portal.adopt(token: "token-G").exitCode == 0)
        #expect(try portal.git.portalToken(["logout"]).exitCode == 0)
        #expect(portal.hookRuns.count == 1)
    }

    @Test(
        "the hook's environment carries no secret, its stdin is /dev/null, and its output goes to stderr",
        arguments: TestBackend.allCases)
    func hookEnvironmentCanary(backend: TestBackend) throws {
        let canaryToken = "canary-token-\(UUID().uuidString)"
        let portal = try PortalHarness(
            backend: backend,
            extraEnvironment: [
                "PORTAL_TOKEN_PASSPHRASE": "canary-passphrase", "SOME_OTHER_VARIABLE": "canary-other",
            ])
        #expect(try portal.adopt(token: canaryToken).exitCode == 0)
        let result = try portal.git.portalToken(["refresh"])
        #expect(result.exitCode == 3)
        #expect(result.stderr.contains("hook-stdout-marker") && result.stderr.contains("hook-stderr-marker"))
        #expect(!result.stdout.contains("hook-"))
        let environment = try String(contentsOf: portal.hookEnvironment, encoding: .utf8)
        #expect(!environment.contains(canaryToken))
        #expect(!environment.contains("canary-passphrase") && !environment.contains("PORTAL_TOKEN_PASSPHRASE"))
        #expect(!environment.contains("canary-other"))
        #expect(environment.contains("PORTAL_SESSION_END_REASON=unauthorized"))
        #expect(environment.contains("PORTAL_END_USER_ID=user-1"))
        #expect(environment.contains("PORTAL_AUTH_ENVIRONMENT_ID=\(portal.environmentID)"))
        #expect(!portal.hookRuns.contains { $0.hasPrefix("hook read stdin") })
        #expect(!result.stderr.contains(canaryToken))
    }

    @Test(
        "under git credential fill the hook's output never reaches git's stdout",
        arguments: TestBackend.allCases, RealGit.allCases)
    func hookOutputUnderGit(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        #expect(try portal.adopt(token: "token-git").exitCode == 0)
        // The session passed its cap: the helper ends it, and the hook writes to its stdout.
        let fill = try portal.git.credential(
            "fill", portal.portalOrigin, environment: try portal.environment(clockShift: 8 * 24 * hour))
        #expect(portal.hookRuns.count == 1)
        #expect(!fill.stdout.contains("hook-"))
        #expect(fill.stdout.contains("username=askpass-username"))
        #expect(!fill.stdout.contains("token-git"))
    }

    @Test(
        "git fill for the Portal origin answers from the session, and approve slides it",
        arguments: TestBackend.allCases, RealGit.allCases)
    func gitAnswersFromSession(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        #expect(try portal.adopt(token: "token-fill", endUserID: "end-user-9").exitCode == 0)
        let fill = try portal.git.credential("fill", portal.portalOrigin)
        let answer = portal.portalOrigin + "username=end-user-9\npassword=token-fill\n"
        switch gitVersion {
        case .debian12:
            // git 2.39 drops the password's expiry.
            #expect(fill.stdout == answer)
        case .current:
            #expect(fill.stdout.hasPrefix(answer))
            #expect(
                fill.stdout.dropFirst(answer.count).wholeMatch(of: /password_expiry_utc=\d+\n/) != nil, "\(fill.stdout)"
            )
        }
        let approve = try portal.git.credential(
            "approve", portal.portalOrigin + "username=end-user-9\npassword=token-fill\n")
        #expect(approve.exitCode == 0 && approve.stderr.isEmpty)
    }

    @Test("the session token never goes to a host that is not Portal's", arguments: TestBackend.allCases)
    func hostGateInProtocolMode(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-secret")
        for host in [
            "api.portalhq.io.attacker.com", "portalhq.io.evil.dev", "evil-portalhq.com", "127.0.0.1:1",
            "localhost:\(portal.server.port)", "api.portalhq.io@attacker.com",
        ] {
            let result = try portal.git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
            #expect(!result.stdout.contains("token-secret"), "leaked to \(host)")
        }
        // Cleartext to Portal's own domain is refused too.
        let cleartext = try portal.git.portalToken(["get"], stdin: "protocol=http\nhost=api.portalhq.io\n")
        #expect(!cleartext.stdout.contains("token-secret"))
        // And a look-alike stays generic storage.
        let lookAlike = "protocol=https\nhost=api.portalhq.io.attacker.com\n"
        #expect(
            try portal.git.portalToken(["store"], stdin: lookAlike + "username=x\npassword=generic\n").exitCode == 0)
        #expect(try portal.git.portalToken(["get"], stdin: lookAlike).stdout == "username=x\npassword=generic\n")
        #expect(try portal.git.portalToken(["get"]).stdout == "token-secret\n")
    }

    @Test("api prints the body; refuses another origin; a non-2xx is exit 6", arguments: TestBackend.allCases)
    func apiCommand(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-api", live: true)
        let me = try portal.git.portalToken(["api", "/api/v3/clients/me"])
        #expect(me.exitCode == 0)
        #expect(me.stdout.contains("\"id\":\"client-1\""))
        let foreign = try portal.git.portalToken(["api", "https://example.com/api/v3/clients/me"])
        #expect(foreign.exitCode == 2)
        let missing = try portal.git.portalToken(["api", "/api/v3/nothing-here"])
        #expect(missing.exitCode == 6)
        #expect(missing.stderr.contains("Portal answered HTTP 404"))
        let request = try #require(portal.requests(to: "/api/v3/clients/me").first)
        #expect(request.bearerToken == "token-api")
        #expect(portal.server.requests.allSatisfy { $0.header("X-Portal-Trace-Id") != nil })
    }

    @Test("the session is cached in the kernel keyring, and logout drops the copy", arguments: TestBackend.allCases)
    func kernelKeyringCopy(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-cached")
        #expect(try portal.git.portalToken(["get"]).stdout == "token-cached\n")
        let names = try KernelKeys.names()
        #expect(names.contains { $0.hasPrefix("portal-token:session:") }, "\(names)")
        #expect(try portal.git.portalToken(["logout"]).exitCode == 0)
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
        #expect(portal.hookRuns.isEmpty)
    }

    @Test(
        """
        a session ended under another spelling of the store (the backend named, the bus address or file path \
        written another way) is not served from the kernel keyring
        """,
        arguments: [TestBackend.auto, .autoWithoutBus])
    func copyEndedUnderAnotherSpelling(backend: TestBackend) throws {
        let portal = try signedIn(backend, "token-spelled")
        #expect(try portal.git.portalToken(["get"]).stdout == "token-spelled\n")
        var other = portal.git.environment
        if backend == .auto {
            other["PORTAL_TOKEN_BACKEND"] = "secret-service"
            // The same bus, its address written without the server's GUID (or with a spare one).
            let address = try #require(other["DBUS_SESSION_BUS_ADDRESS"])
            other["DBUS_SESSION_BUS_ADDRESS"] =
                address.contains(",guid=")
                ? String(address.prefix { $0 != "," }) : address + ",guid=\(try Self.busID(other))"
        } else {
            other["PORTAL_TOKEN_BACKEND"] = "file"
            let file = try #require(other["PORTAL_TOKEN_FILE"]) as NSString
            other["PORTAL_TOKEN_FILE"] = file.deletingLastPathComponent + "/./" + file.lastPathComponent
        }
        portal.server.revoke("token-spelled")
        let ended = try ProcessRunner.portalToken(["refresh"], stdin: "", environment: other)
        #expect(ended.exitCode == 3, "\(ended.stderr)")
        #expect(portal.hookRuns == ["unauthorized user-1 \(portal.environmentID)"])
        let after = try portal.git.portalToken(["get"])
        #expect(after.exitCode == 1, "the ended session's token was served: \(after.stdout)")
        #expect(!after.stdout.contains("token-spelled"))
    }

    /// The bus's ID, as `GetId` answers it.
    static func busID(_ environment: [String: String]) throws -> String {
        let reply = try ProcessRunner.run(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                "--method", "org.freedesktop.DBus.GetId",
            ], environment: environment, timeout: 10)
        return String(reply.stdout.filter { $0.isHexDigit })
    }

    @Test(
        "an unreadable stored session is cleared with a warning that never shows it",
        arguments: [TestBackend.secretService])
    func unreadableSession(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        let written = try LibsecretClient.run(
            "/usr/bin/secret-tool",
            [
                "store", "--label=broken", "xdg:schema", "io.portalhq.PortalToken.Session",
                "auth-environment-id", portal.environmentID, "end-user-id", "user-1",
            ], stdin: #"{"clientSessionToken":"payload-canary"}"#, environment: portal.git.environment, timeout: 10)
        #expect(written.exitCode == 0)
        let result = try portal.git.portalToken(["get"])
        #expect(result.exitCode == 1)
        #expect(
            result.stderr.contains(
                """
                portal-token: warning: the stored Portal session for environment '\(portal.environmentID)' could \
                not be read and was removed
                """
            ))
        #expect(!result.stderr.contains("payload-canary"))
        #expect(try portal.git.portalToken(["get"]).stderr.contains("warning") == false)
    }
}

/// Runs `body` on `count` threads at once (threads of their own: a dispatch queue would run
/// only as many as there are cores) and returns the results in order.
func concurrently<Result: Sendable>(_ count: Int, _ body: @escaping @Sendable () throws -> Result) throws -> [Result] {
    let results = Locked<[Int: Swift.Result<Result, any Error>]>([:])
    let threads = (0..<count).map { index in
        Thread {
            let outcome = Swift.Result { try body() }
            results.update { $0[index] = outcome }
        }
    }
    threads.forEach { $0.start() }
    while results.value.count < count { usleep(2000) }
    return try (0..<count).map { try results.value[$0]!.get() }
}
