import Foundation
import PortalTokenTestSupport
import Testing

private let hour: Int64 = 3600

/// The proxy end to end: the binary's `exec --proxy`, a shell script as the child, real curl, a
/// real store and the fake Portal server, which counts every connection it accepts.
@Suite("the Portal API proxy")
struct ProxyTests {
    /// curl as the child runs it: never through a proxy of the environment, failing on nothing.
    static let curlFunction = """
        H="$PORTAL_TOKEN_PROXY_HEADER: $PORTAL_TOKEN_PROXY_CREDENTIAL"
        J="-H Accept:application/json -H Content-Type:application/json"
        c() { curl -sS --noproxy '*' --max-time 60 "$@"; }

        """

    static func exec(
        _ portal: PortalHarness, _ script: String, environment: [String: String]? = nil, timeout: Double = 60
    ) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["exec", "--proxy", "--", "sh", "-c", curlFunction + script],
            environment: environment ?? portal.git.environment, timeout: timeout)
    }

    static func uniqueToken() -> String { "token-proxy-\(UInt64.random(in: 0...UInt64.max))" }

    /// A harness on the encrypted file, signed in with `token`, which the fake Portal takes as live.
    static func signedIn(_ token: String = ProxyTests.uniqueToken()) throws -> (portal: PortalHarness, token: String) {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken(token)
        #expect(try portal.adopt(token: token).exitCode == 0)
        return (portal, token)
    }

    /// `count` requests to /api/v3/clients/me sent at once through exec --proxy, each printing its status.
    static func concurrentRequests(_ portal: PortalHarness, count: Int, timeout: Double = 60) throws -> ProcessResult {
        try exec(
            portal,
            """
            i=0
            while [ $i -lt \(count) ]; do
                c -o /dev/null -w '%{http_code}\\n' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me" &
                i=$((i + 1))
            done
            wait
            """, timeout: timeout)
    }

    @Test(
        "a child calls the client API through exec --proxy; Portal sees the bearer, the child never holds the token")
    func childUsesTheProxy() throws {
        let (portal, token) = try Self.signedIn()
        let scratch = try ScratchFolder("proxy")

        var traced = portal.git.environment
        traced["PORTAL_TOKEN_TRACE"] = "1"
        let result = try Self.exec(
            portal,
            """
            tr '\\0' '\\n' < /proc/$$/environ > '\(scratch.path)/environ'
            tr '\\0' ' ' < /proc/$$/cmdline > '\(scratch.path)/argv'
            env > '\(scratch.path)/env'
            echo "host=$PORTAL_API_HOST"
            c -w '\\nstatus=%{http_code}\\n' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me"
            c -o /dev/null -w 'own=%{http_code}\\n' -H "$H" $J -H 'Authorization: Bearer the-child-s-own' \\
                "http://$PORTAL_API_HOST/api/v3/clients/me"
            c -o /dev/null -o /dev/null -w 'connects=%{num_connects}\\n' -H "$H" $J \\
                "http://$PORTAL_API_HOST/api/v3/clients/me" "http://$PORTAL_API_HOST/api/v3/clients/me"
            """, environment: traced)
        #expect(result.exitCode == 0, "\(result.stderr)")
        // The trace names each proxied request, never the token.
        #expect(result.stderr.contains("proxy: GET /api/v3/clients/me -> HTTP 200"))
        #expect(!result.stderr.contains(token) && !result.stdout.contains(token))
        #expect(result.stdout.contains("\"id\":\"client-1\""))
        #expect(result.stdout.contains("status=200"))
        #expect(result.stdout.contains("host=127.0.0.1:"))
        #expect(!result.stdout.contains("host=127.0.0.1:\(portal.server.port)\n"))
        // The child's own Authorization reached Portal untouched (and its 401 ended nothing).
        #expect(result.stdout.contains("own=401"))
        #expect(result.stdout.contains("connects=1\nconnects=0"), "keep-alive: \(result.stdout)")
        let requests = portal.requests(to: "/api/v3/clients/me")
        #expect(requests.count == 4)
        #expect(requests.map(\.bearerToken) == [token, "the-child-s-own", token, token])
        #expect(portal.hookRuns.isEmpty)
        #expect(try portal.git.portalToken(["token"]).stdout == token + "\n")
        for file in ["environ", "argv", "env"] {
            let text = try String(contentsOfFile: scratch.path + "/" + file, encoding: .utf8)
            #expect(!text.isEmpty, "\(file)")
            #expect(!text.contains(token), "the token is in the child's \(file)")
            #expect(!text.contains(String(token.dropFirst(6))), "the token is in the child's \(file)")
        }
        let environment = try String(contentsOfFile: scratch.path + "/environ", encoding: .utf8)
        #expect(environment.contains("PORTAL_TOKEN_PROXY_CREDENTIAL="))
        #expect(environment.contains("PORTAL_TOKEN_PROXY_HEADER=Portal-Token-Proxy"))
        #expect(!environment.contains("PORTAL_CLIENT_SESSION_TOKEN="))
        #expect(portal.server.violations.isEmpty, "\(portal.server.violations)")
    }

    @Test("a foreign Host, no marker, a wrong credential, a path, method or origin not allowed: no upstream connection")
    func refusals() throws {
        let (portal, token) = try Self.signedIn()
        let before = portal.server.connectionCount
        let result = try Self.exec(
            portal,
            """
            u="http://$PORTAL_API_HOST/api/v3/clients/me"
            s() {
                name=$1
                shift
                c -o /dev/null -w "$name=%{http_code}\\n" $J "$@"
            }
            s host -H "$H" -H 'Host: evil.example' "$u"
            s nomarker "$u"
            s wrong -H "$PORTAL_TOKEN_PROXY_HEADER: 0123456789" "$u"
            s path -H "$H" "http://$PORTAL_API_HOST/api/v3/auth/methods"
            s dots -H "$H" --path-as-is "http://$PORTAL_API_HOST/api/v3/clients/me/../../auth/methods"
            s method -H "$H" -X TRACE "$u"
            s connect -H "$H" -X CONNECT "$u"
            curl -sS --max-time 60 -o /dev/null -w 'origin=%{http_code}\\n' -H "$H" $J \\
                --proxy "http://$PORTAL_API_HOST" "http://api.portalhq.io/api/v3/clients/me"
            """)
        #expect(result.exitCode == 0, "\(result.stderr)")
        for expected in [
            "host=403", "nomarker=412", "wrong=403", "path=403", "dots=403", "method=405", "connect=405", "origin=400",
        ] {
            #expect(result.stdout.contains(expected + "\n"), "\(expected): \(result.stdout)")
        }
        #expect(portal.server.connectionCount == before)
        #expect(portal.server.requests.isEmpty)
        #expect(!result.stdout.contains(token) && !result.stderr.contains(token))
    }

    @Test("a redirect to another host is passed back, never followed; http_proxy and the like receive nothing")
    func redirectsAndProxyEnvironment() throws {
        let sink = try FakePortalServer(strict: false)
        defer { sink.stop() }
        let other = try FakePortalServer(strict: false)
        defer { other.stop() }
        let (portal, token) = try Self.signedIn()
        portal.server.addRoute("GET", "/api/v3/clients/me/moved", bearer: .required) { _, _ in
            .redirect(to: "http://127.0.0.1:\(other.port)/api/v3/clients/me")
        }
        var environment = portal.git.environment
        for name in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"] {
            environment[name] = "http://127.0.0.1:\(sink.port)"
        }
        environment["no_proxy"] = ""
        environment["NO_PROXY"] = ""
        let result = try Self.exec(
            portal,
            """
            c -D - -o /dev/null -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me/moved"
            c -o /dev/null -w 'me=%{http_code}\\n' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me"
            """, environment: environment)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.contains("HTTP/1.1 302"))
        #expect(result.stdout.contains("Location: http://127.0.0.1:\(other.port)/api/v3/clients/me"))
        #expect(result.stdout.contains("me=200"))
        #expect(other.connectionCount == 0)
        #expect(sink.connectionCount == 0)
        #expect(portal.requests(to: "/api/v3/clients/me/moved").map(\.bearerToken) == [token])
    }

    @Test("eight concurrent 401s through the proxy run the hook once, and each is passed back")
    func concurrentUnauthorized() throws {
        let portal = try PortalHarness(backend: .file)
        let token = Self.uniqueToken()
        #expect(try portal.adopt(token: token, endUserID: "U").exitCode == 0)
        let result = try Self.exec(
            portal,
            """
            for i in 1 2 3 4 5 6 7 8; do
                c -o /dev/null -w '%{http_code}\\n' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me" &
            done
            wait
            """)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == Array(repeating: "401", count: 8), "\(result.stdout)")
        #expect(portal.hookRuns == ["unauthorized U \(portal.environmentID)"])
        // One audit line each, whole; the one whose 401 ended the session says so, and only it.
        let lines = try String(
            contentsOfFile: try #require(portal.git.environment["XDG_STATE_HOME"]) + "/portal-token/audit.jsonl",
            encoding: .utf8
        ).split(separator: "\n")
        let proxied = lines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
            .filter { $0["operation"] as? String == "proxy" }
        #expect(proxied.count == 8, "\(lines)")
        #expect(proxied.allSatisfy { $0["httpStatus"] as? Int == 401 }, "\(proxied)")
        #expect(proxied.filter { $0["endedSession"] as? Bool == true }.count == 1, "\(proxied)")
        // Sent with the token and refused, or found no session left to send.
        #expect(
            proxied.allSatisfy { ["unauthorized", "not-signed-in"].contains($0["outcome"] as? String ?? "") },
            "\(proxied)")
        #expect(
            proxied.filter { $0["endedSession"] as? Bool == true }.allSatisfy {
                $0["outcome"] as? String == "unauthorized"
            })
        #expect(try portal.git.portalToken(["token"]).exitCode == 1)
    }

    @Test("a proxied request slides the expiry, as api does")
    func slidesTheExpiry() throws {
        let (portal, token) = try Self.signedIn()
        let result = try Self.exec(
            portal,
            """
            c -o /dev/null -w '%{http_code}\\n' -H "$H" $J "http://$PORTAL_API_HOST/api/v3/clients/me"
            """, environment: try portal.environment(clockShift: 23 * hour))
        #expect(result.exitCode == 0 && result.stdout == "200\n", "\(result.stdout) \(result.stderr)")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
        // Slid to 23 h + 24 h: at 46 h the token is handed out with no check with Portal.
        let later = try portal.portalToken(["token"], clockShift: 46 * hour)
        #expect(later.exitCode == 0 && later.stdout == token + "\n")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
    }

    @Test("50 MB go up chunked and come down chunked intact, streamed through the proxy")
    func largeBodies() throws {
        let (portal, _) = try Self.signedIn()
        portal.server.enableLargeBodies()
        let scratch = try ScratchFolder("proxy")
        let size = 50 * 1024 * 1024
        let upload = scratch.path + "/up"
        let uploadDigest = try FakePortalServer.writeRandomUpload(count: size, to: upload)

        let result = try Self.exec(
            portal,
            """
            c -w '\\nup=%{http_code}\\n' -H "$H" -H 'Transfer-Encoding: chunked' -X POST -T '\(upload)' \\
                "http://$PORTAL_API_HOST\(FakePortalServer.uploadPath)"
            c -o '\(scratch.path)/down' -D '\(scratch.path)/down-head' -w 'down=%{http_code}\\n' -H "$H" \\
                "http://$PORTAL_API_HOST\(FakePortalServer.downloadPath)?bytes=\(size)"
            grep -i '^Transfer-Encoding: chunked' '\(scratch.path)/down-head' >/dev/null && echo down-chunked
            sha256sum '\(scratch.path)/down'
            grep VmHWM /proc/$PPID/status
            """, timeout: 300)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.contains("up=200") && result.stdout.contains("down=200"), "\(result.stdout)")
        #expect(result.stdout.contains(#""bytes":\#(size),"sha256":"\#(uploadDigest)","chunked":true"#))
        #expect(result.stdout.contains("down-chunked"))
        #expect(result.stdout.contains(FakePortalServer.downloadDigest(count: size) + "  "))
        // The proxy passed 100 MB along without holding them: its peak resident size stays small.
        let peak = result.stdout.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") }
        #expect((peak ?? Int.max) < 40 * 1024, "peak resident kB: \(String(describing: peak))")
        #expect(portal.server.violations.isEmpty, "\(portal.server.violations)")
    }

    @Test("100 concurrent proxied requests all succeed")
    func hundredConcurrent() throws {
        let (portal, _) = try Self.signedIn()
        let result = try Self.concurrentRequests(portal, count: 100, timeout: 120)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == Array(repeating: "200", count: 100), "\(result.stdout)")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 100)
        #expect(portal.server.violations.isEmpty, "\(portal.server.violations)")
    }

    @Test("exec --proxy exits with the command's status, and when not signed in with 1 before it starts")
    func exitCodes() throws {
        let portal = try PortalHarness(backend: .file)
        let unsigned = try Self.exec(portal, "echo ran")
        #expect(unsigned.exitCode == 1 && unsigned.stdout.isEmpty)
        #expect(try portal.adopt(token: Self.uniqueToken()).exitCode == 0)
        #expect(try Self.exec(portal, "exit 7").exitCode == 7)
        #expect(try Self.exec(portal, "kill -TERM $$").exitCode == 128 + 15)
        let missing = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["exec", "--proxy", "--", "no-such-command-here"],
            environment: portal.git.environment)
        #expect(missing.exitCode == 127)
    }

    @Test("portal-token proxy on a Unix socket serves the same user")
    func unixSocket() throws {
        let (portal, token) = try Self.signedIn()
        let directory = "/tmp/portal-token-proxy-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/proxy.sock"
        let proxy = try ProcessRunner.spawn(
            ProcessRunner.portalTokenPath, ["proxy", "--socket", socket], environment: portal.git.environment)
        defer {
            if kill(proxy, 0) == 0 {
                kill(proxy, SIGKILL)
                _ = waitpid(proxy, nil, 0)
            }
        }
        var waited = 0
        while !FileManager.default.fileExists(atPath: socket), waited < 100 {
            usleep(100_000)
            waited += 1
        }
        let result = try ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--unix-socket", socket, "-H", "Accept: application/json", "-H",
                "Content-Type: application/json", "-w", "\nstatus=%{http_code}\n", "http://localhost/api/v3/clients/me",
            ])
        #expect(result.stdout.contains("status=200"), "\(result.stdout) \(result.stderr)")
        #expect(portal.requests(to: "/api/v3/clients/me").map(\.bearerToken) == [token])
        var status = stat()
        #expect(stat(socket, &status) == 0 && status.st_mode & 0o777 == 0o600)
        // SIGTERM stops it, and the socket goes with it.
        kill(proxy, SIGTERM)
        var code: Int32 = 0
        _ = waitpid(proxy, &code, 0)
        #expect(code == 0, "the proxy ended cleanly on SIGTERM (wait status \(code))")
        #expect(!FileManager.default.fileExists(atPath: socket))
    }
}
