import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Delegated credentials end to end: `delegate` and `delegations` of the real binary, real curl
/// through `exec --proxy`, `proxy --listen` and the agent's socket, the fake Portal upstream
/// counting what reaches it, and the wall clock moved by the test shim.
@Suite("delegated credentials through the proxy")
struct DelegationTests {
    /// A request through the proxy the child's environment names, with `CRED` as the credential:
    /// prints NAME=STATUS.
    static let send = """
        J="-H Accept:application/json -H Content-Type:application/json"
        s() {
            name=$1; cred=$2; shift 2
            curl -sS --noproxy '*' --max-time 60 -o /dev/null -w "$name=%{http_code}\\n" $J \\
                -H "$PORTAL_TOKEN_PROXY_HEADER: $cred" "$@"
        }
        u="http://$PORTAL_API_HOST/api/v3/clients/me"

        """

    static func exec(
        _ portal: PortalHarness, _ script: String, environment: [String: String]? = nil
    ) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["exec", "--proxy", "--", "sh", "-c", send + script],
            environment: environment ?? portal.git.environment, timeout: 60)
    }

    static func delegate(_ portal: PortalHarness, _ arguments: [String], stdin: String? = nil) throws -> String {
        let result = try portal.git.portalToken(["delegate"] + arguments, stdin: stdin)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stderr.contains("portal-token: delegated credential "))
        return result.stdout.trimmingCharacters(in: .newlines)
    }

    static func id(of result: String) -> String? {
        result.split(separator: " ").drop { $0 != "credential" }.dropFirst().first.map { String($0.prefix(16)) }
    }

    static func auditText(_ portal: PortalHarness) throws -> String {
        try String(
            contentsOfFile: try #require(portal.git.environment["XDG_STATE_HOME"]) + "/portal-token/audit.jsonl",
            encoding: .utf8)
    }

    /// No 8-character piece of any secret in `text`.
    static func expectNoPiece(of secrets: [String], in text: String, _ what: String) {
        for secret in secrets {
            let characters = Array(secret)
            for start in stride(from: 0, to: max(characters.count - 8, 1), by: 1) {
                let piece = String(characters[start..<min(start + 8, characters.count)])
                if text.contains(piece) {
                    Issue.record("\(what) holds a piece of a secret: \(piece)")
                    return
                }
            }
        }
    }

    @Test("delegate --ttl 10m --allow GET --path: served that, refused POST, other paths and after 10 minutes")
    func scopeAndExpiry() throws {
        let (portal, token) = try ProxyTests.signedIn()
        let minted = try portal.git.portalToken(
            ["delegate", "--ttl", "10m", "--allow", "GET", "--path", "/api/v3/clients/me"])
        #expect(minted.exitCode == 0, "\(minted.stderr)")
        let credential = minted.stdout.trimmingCharacters(in: .newlines)
        let id = try #require(Self.id(of: minted.stderr))
        #expect(credential.hasPrefix("ptd1.") && !credential.contains(token))
        var environment = portal.git.environment
        environment["CRED"] = credential
        let result = try Self.exec(
            portal,
            """
            s get "$CRED" "$u"
            s post "$CRED" -X POST -d '{}' "$u"
            s below "$CRED" "$u/wallets"
            s other "$CRED" "http://$PORTAL_API_HOST/api/v3/auth/methods"
            s own "$CRED" -H 'Authorization: Bearer mine' -X POST -d '{}' "$u"
            """, environment: environment)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(
            result.stdout.split(separator: "\n") == ["get=200", "post=403", "below=403", "other=403", "own=403"],
            "\(result.stdout)")
        // Only the served request reached Portal, with the session's bearer (the client's own
        // Authorization does not lift the credential's method).
        #expect(portal.server.requests.map(\.description) == ["GET /api/v3/clients/me"])
        #expect(portal.server.requests.map(\.bearerToken) == [token])

        let listed = try portal.git.portalToken(["delegations", "--format", "json"])
        let entries = try #require(
            (try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])?["delegations"]
                as? [[String: Any]])
        #expect(entries.contains { $0["id"] as? String == id && $0["origin"] as? String == "delegate" }, "\(entries)")
        // Ten minutes on (the proxy's clock moved), the same credential is refused with nothing sent.
        var later = try portal.environment(clockShift: 601)
        later["CRED"] = credential
        let expired = try Self.exec(
            portal,
            """
            s get "$CRED" "$u"
            curl -sS -H "$PORTAL_TOKEN_PROXY_HEADER: $CRED" -H Accept:application/json "$u"
            """,
            environment: later)
        #expect(expired.stdout.hasPrefix("get=403"), "\(expired.stdout) \(expired.stderr)")
        #expect(expired.stdout.contains("the credential expired"))
        #expect(portal.server.requests.count == 1)

        let audit = try Self.auditText(portal)
        #expect(audit.contains("\"delegation\":[\"\(id)\"]"), "\(audit)")
        Self.expectNoPiece(of: [credential, token], in: audit, "the audit log")
        Self.expectNoPiece(of: [credential, token], in: result.stderr + expired.stderr + listed.stdout, "the output")
    }

    @Test("a credential derived offline is refused what its parent is, and what its own caveats exclude")
    func attenuation() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let parent = try Self.delegate(
            portal, ["--ttl", "1h", "--allow", "GET", "--allow", "POST", "--path", "/api/v3/clients/me"])
        // Derived with no session, no agent, no store: an empty HOME and nothing else.
        let offline = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["delegate", "--from", "-", "--allow", "GET", "--ttl", "5m"],
            stdin: parent + "\n", environment: ["PATH": "/usr/bin:/bin", "HOME": try ScratchFolder("empty").path])
        #expect(offline.exitCode == 0, "\(offline.stderr)")
        let child = offline.stdout.trimmingCharacters(in: .newlines)
        #expect(child.hasPrefix("ptd1.") && child != parent)
        // A caveat the child tries to widen with is one more restriction, never a widening.
        let widened = try Self.delegate(portal, ["--from", "-", "--path", "/api/v3/clients/me/*"], stdin: child)
        var environment = portal.git.environment
        (environment["PARENT"], environment["CHILD"], environment["WIDE"]) = (parent, child, widened)
        let result = try Self.exec(
            portal,
            """
            s parent-post "$PARENT" -X POST -d '{}' "$u"   # reaches Portal, which has no POST there
            s child-get "$CHILD" "$u"
            s child-post "$CHILD" -X POST -d '{}' "$u"
            s child-other "$CHILD" "$u/wallets"
            s wide-get "$WIDE" "$u"
            s wide-below "$WIDE" "$u/wallets"
            """, environment: environment)
        #expect(
            result.stdout.split(separator: "\n") == [
                "parent-post=404", "child-get=200", "child-post=403", "child-other=403", "wide-get=403",
                "wide-below=403",
            ], "\(result.stdout) \(result.stderr)")
        #expect(portal.server.requests.count == 2)
        let listing = try portal.git.portalToken(["delegations"]).stdout
        #expect(listing.contains("derived"), "\(listing)")
    }

    @Test("one byte changed or a caveat removed: refused, with nothing sent upstream")
    func tampered() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let credential = try Self.delegate(portal, ["--ttl", "1h", "--allow", "GET"])
        var bytes = Array(credential.utf8)
        bytes[bytes.count / 2] = bytes[bytes.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        // The caveat `methods GET` taken out, the tag kept.
        let base64 = String(credential.dropFirst(5)).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        let padded = base64 + String(repeating: "=", count: (4 - base64.count % 4) % 4)
        var body = [UInt8](try #require(Data(base64Encoded: padded)))
        let nul = body.count - 33
        var lines = String(decoding: body[..<nul], as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.contains("methods GET"), "\(lines)")
        lines.removeAll { $0 == "methods GET" }
        body = Array(lines.joined(separator: "\n").utf8) + body[nul...]
        let removed =
            "ptd1."
            + Data(body).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        var environment = portal.git.environment
        (environment["GOOD"], environment["FLIPPED"], environment["REMOVED"]) = (
            credential, String(decoding: bytes, as: UTF8.self), removed
        )
        let result = try Self.exec(
            portal,
            """
            s flipped "$FLIPPED" -X POST -d '{}' "$u"
            s removed "$REMOVED" -X POST -d '{}' "$u"
            s junk "ptd1.notacredential" "$u"
            s good-post "$GOOD" -X POST -d '{}' "$u"
            """, environment: environment)
        #expect(
            result.stdout.split(separator: "\n") == ["flipped=403", "removed=403", "junk=403", "good-post=403"],
            "\(result.stdout) \(result.stderr)")
        #expect(portal.server.requests.isEmpty)
    }

    @Test("delegations lists a credential and revokes it and its children by id, refused from the next request")
    func revocationAndUses() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let minted = try portal.git.portalToken(["delegate", "--ttl", "1h"])
        let credential = minted.stdout.trimmingCharacters(in: .newlines)
        let id = try #require(Self.id(of: minted.stderr))
        let child = try Self.delegate(portal, ["--from", "-", "--uses", "2"], stdin: credential)
        var environment = portal.git.environment
        (environment["CRED"], environment["CHILD"], environment["ID"]) = (credential, child, id)
        environment["BIN"] = ProcessRunner.portalTokenPath
        let result = try Self.exec(
            portal,
            """
            s before "$CRED" "$u"
            s child-1 "$CHILD" "$u"
            s child-2 "$CHILD" "$u"
            s child-3 "$CHILD" "$u"
            "$BIN" delegations | grep -c "^$ID " | sed 's/^/listed=/'
            "$BIN" delegations --revoke "$ID" 2>&1 | sed 's/^/revoke: /'
            s after "$CRED" "$u"
            """, environment: environment)
        #expect(
            result.stdout.split(separator: "\n") == [
                "before=200", "child-1=200", "child-2=200", "child-3=403", "listed=1",
                "revoke: portal-token: revoked \(id)",
                "after=403",
            ], "\(result.stdout) \(result.stderr)")
        #expect(portal.server.requests.count == 3)
        let listing = try portal.git.portalToken(["delegations", "--format", "json"])
        #expect(listing.stdout.contains("\"revoked\":true"), "\(listing.stdout)")
        #expect(try portal.git.portalToken(["delegations", "--revoke", "nothex"]).exitCode == 2)
    }

    @Test("concurrent requests spend a --uses bound exactly once each, and no chain may take another's id")
    func concurrentUsesAndTakenIDs() throws {
        let (portal, _) = try ProxyTests.signedIn()
        let victim = try Self.delegate(portal, ["--ttl", "1h", "--uses", "3"])
        let parent = try #require(DelegatedCredential(text: Array(try Self.delegate(portal, ["--ttl", "1h"]).utf8)))
        let victimID = try #require(DelegatedCredential(text: Array(victim.utf8))?.id)
        // A holder who names its derived credential with the victim's id, to spend the victim's uses.
        let thief = parent.narrowed(id: victimID, by: [.uses(1000)]).text.text
        var environment = portal.git.environment
        (environment["VICTIM"], environment["THIEF"]) = (victim, thief)
        let result = try Self.exec(
            portal,
            """
            s thief "$THIEF" "$u"
            for i in 1 2 3 4 5 6 7 8 9 10; do s victim "$VICTIM" "$u" & done
            wait
            """, environment: environment)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "thief=403", "\(result.stdout) \(result.stderr)")
        #expect(lines.filter { $0 == "victim=200" }.count == 3, "\(lines)")
        #expect(lines.filter { $0 == "victim=403" }.count == 7, "\(lines)")
        #expect(portal.server.requests.count == 3)
    }

    @Test("exec --proxy's credential works where the registry cannot be written; it only goes unlisted")
    func unwritableRegistry() throws {
        let (portal, _) = try ProxyTests.signedIn()
        var environment = portal.git.environment
        environment["XDG_STATE_HOME"] = "/dev/null/state"
        let result = try Self.exec(
            portal, "s own \"$PORTAL_TOKEN_PROXY_CREDENTIAL\" \"$u\"", environment: environment)
        #expect(result.stdout == "own=200\n", "\(result.stdout) \(result.stderr)")
        // One that counts its uses cannot be counted there: refused, never served uncounted.
        let counted = try ProcessRunner.run(
            ProcessRunner.portalTokenPath,
            [
                "exec", "--proxy", "--", "sh", "-c",
                Self.send
                    + """
                    c=$(printf '%s' "$PORTAL_TOKEN_PROXY_CREDENTIAL" | "$BIN" delegate --from - --uses 5)
                    s counted "$c" "$u"
                    """,
            ], environment: environment.merging(["BIN": ProcessRunner.portalTokenPath]) { $1 }, timeout: 60)
        #expect(counted.stdout == "counted=403\n", "\(counted.stdout) \(counted.stderr)")
        #expect(portal.server.requests.count == 1)
    }

    @Test("exec --proxy hands its child a delegated credential with an expiry, which the child can narrow")
    func execHandsADelegatedCredential() throws {
        let (portal, _) = try ProxyTests.signedIn()
        var environment = portal.git.environment
        environment["BIN"] = ProcessRunner.portalTokenPath
        let result = try ProcessRunner.run(
            ProcessRunner.portalTokenPath,
            [
                "exec", "--proxy", "--ttl", "3s", "--", "sh", "-c",
                Self.send
                    + """
                    case "$PORTAL_TOKEN_PROXY_CREDENTIAL" in ptd1.*) echo delegated ;; esac
                    s own "$PORTAL_TOKEN_PROXY_CREDENTIAL" "$u"
                    ro=$(printf '%s' "$PORTAL_TOKEN_PROXY_CREDENTIAL" | "$BIN" delegate --from - --allow GET)
                    s narrowed-post "$ro" -X POST -d '{}' "$u"
                    s narrowed-get "$ro" "$u"
                    s plain "0123456789abcdef" "$u"
                    sleep 4
                    s expired "$PORTAL_TOKEN_PROXY_CREDENTIAL" "$u"
                    """,
            ], environment: environment, timeout: 60)
        #expect(
            result.stdout.split(separator: "\n") == [
                "delegated", "own=200", "narrowed-post=403", "narrowed-get=200", "plain=403", "expired=403",
            ], "\(result.stdout) \(result.stderr)")
        #expect(portal.server.requests.count == 2)
        #expect(try portal.git.portalToken(["exec", "--ttl", "1h", "--", "true"]).exitCode == 2)
    }

    @Test("a 401 through a delegated credential ends the session once and runs the hook exactly once")
    func unauthorizedRunsTheHookOnce() throws {
        let (portal, token) = try ProxyTests.signedIn()
        let credential = try Self.delegate(portal, ["--ttl", "1h"])
        portal.server.revoke(token)
        var environment = portal.git.environment
        environment["CRED"] = credential
        let result = try Self.exec(
            portal, "s one \"$CRED\" \"$u\" & s two \"$CRED\" \"$u\" & s three \"$CRED\" \"$u\" & wait",
            environment: environment)
        #expect(result.stdout.split(separator: "\n").count == 3, "\(result.stdout) \(result.stderr)")
        #expect(portal.hookRuns.count == 1, "\(portal.hookRuns)")
    }

    @Test("on the agent's socket a credential narrows what the rules allow, and never admits a caller they refuse")
    func agentSocket() throws {
        let harness = try AgentHarness()
        let token = try harness.signIn()
        let portal = harness.portal
        let mine = try Self.delegate(portal, ["--ttl", "1h", "--caller", "uid \(getuid())"])
        let unbound = try Self.delegate(portal, ["--ttl", "1h", "--allow", "GET"])
        let other = try Self.delegate(portal, ["--ttl", "1h", "--caller", "uid 4242"])
        func curl(_ credential: String, sandboxed: Bool = false) throws -> ProcessResult {
            let arguments = AgentProxyTests.curlArguments(harness.socket) + ["-H", "Portal-Token-Proxy: \(credential)"]
            if sandboxed { return try harness.sandboxed(arguments) }
            return try ProcessRunner.run(arguments[0], Array(arguments.dropFirst()))
        }
        #expect(try curl(mine).stdout.contains("status=200"))
        let refused = try curl(other)
        #expect(refused.stdout.contains("status=403"), "\(refused.stdout)")
        #expect(refused.stdout.contains("does not meet the credential's condition 'uid 4242'"))
        // The rules refuse another user namespace; a credential does not change that.
        let sandbox = try curl(mine, sandboxed: true)
        #expect(sandbox.stdout.contains("status=403"), "\(sandbox.stdout) \(sandbox.stderr)")
        #expect(portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])

        // Client mode: a proxy whose upstream is the agent judges the caveats it can (a caller
        // condition, on its loopback port, never holds) and passes the credential on; the agent
        // checks it against the session it holds.
        let proxy = try RunningProcess(
            ProcessRunner.portalTokenPath, ["proxy", "--listen", "127.0.0.1:0"],
            environment: harness.clientEnvironment())
        defer {
            proxy.signal(SIGTERM)
            _ = try? proxy.finish(timeout: 10)
        }
        for _ in 0..<400 where !proxy.stdout.contains("PORTAL_TOKEN_PROXY_CREDENTIAL=") { usleep(25_000) }
        let host = try #require(
            proxy.stdout.split(separator: "\n").first { $0.hasPrefix("PORTAL_API_HOST=") }?.dropFirst(16),
            "\(proxy.stdout) \(proxy.stderr)")
        func viaClient(_ credential: String) throws -> String {
            try ProcessRunner.run(
                "/usr/bin/curl",
                [
                    "-sS", "--noproxy", "*", "-w", "\n%{http_code}", "-H", "Accept: application/json", "-H",
                    "Content-Type: application/json",
                    "-H", "Portal-Token-Proxy: \(credential)", "http://\(host)/api/v3/clients/me",
                ]
            ).stdout
        }
        let served = try viaClient(unbound)
        #expect(served.hasSuffix("\n200"), "\(served)")
        let bound = try viaClient(mine)
        #expect(bound.hasSuffix("\n403") && bound.contains("loopback"), "\(bound)")
        let forged = try viaClient(String(unbound.dropLast(3)) + (unbound.hasSuffix("AAA") ? "BBB" : "AAA"))
        #expect(forged.hasSuffix("\n403"), "\(forged)")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 2)
        // Minting needs the session: in client mode it is refused naming the agent.
        let minting = try harness.client(["delegate", "--ttl", "1h"])
        #expect(minting.exitCode == 4 && minting.stderr.contains("agent"), "\(minting.stderr)")
        // Neither the agent's log nor the client-mode proxy's output holds a piece of a secret.
        let secrets = [mine, other, unbound, token]
        Self.expectNoPiece(of: secrets, in: harness.log, "the agent's log")
        Self.expectNoPiece(of: secrets, in: proxy.stderr, "the client-mode proxy's stderr")
        Self.expectNoPiece(of: secrets, in: try Self.auditText(portal), "the audit log")
    }
}
