import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

private let hour: Int64 = 3600

private struct ListenerFailure: Error, CustomStringConvertible {
    let output: String
    var description: String { "the foreign listener printed no port: \(output)" }
}

/// A listener on 127.0.0.1 run as another uid (65534): it takes every connection, records what
/// arrives on its stdout and answers 200 with a client record, as a port squatter would.
private final class ForeignListener {
    let process: RunningProcess
    let port: UInt16

    init() throws {
        let script = """
            import socket, sys
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            sys.stderr.write("port %d\\n" % s.getsockname()[1]); sys.stderr.flush()
            while True:
                c, _ = s.accept()
                c.settimeout(5)
                data = b""
                try:
                    while b"\\r\\n\\r\\n" not in data:
                        chunk = c.recv(65536)
                        if not chunk: break
                        data += chunk
                except Exception:
                    pass
                sys.stdout.buffer.write(b"connection\\n" + data); sys.stdout.flush()
                if data:
                    body = b'{"id":"client-1"}'
                    head = b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
                    head += b"Content-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % len(body)
                    c.sendall(head + body)
                c.close()
            """
        process = try RunningProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
            environment: ["PATH": "/usr/bin:/bin"])
        let line = try process.waitForStderr(containing: "\n")
        let word = line.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let port = word.flatMap({ UInt16($0) }) else { throw ListenerFailure(output: line) }
        self.port = port
    }

    /// Everything it received so far.
    var received: String { process.stdout }
}

/// The session token goes only to a loopback listener of the user's own (docs/security.md, "Bearers on loopback").
@Suite("Bearers on loopback")
struct BearerListenerTests {
    @Test("api, token past the idle window and refresh send no bearer to another uid's listener")
    func foreignListenerGetsNoBearer() throws {
        let listener = try ForeignListener()
        let portal = try PortalHarness(
            backend: .file, extraEnvironment: ["PORTAL_API_HOST": "127.0.0.1:\(listener.port)"])
        let origin = "protocol=http\nhost=127.0.0.1:\(listener.port)\n"
        #expect(
            try portal.git.portalToken(["store"], stdin: origin + "username=user-1\npassword=token-squatted\n")
                .exitCode == 0)

        let runs = [
            ("api", try portal.git.portalToken(["api", "/api/v3/clients/me"])),
            ("token", try portal.portalToken(["token"], clockShift: 25 * hour)),
            ("refresh", try portal.git.portalToken(["refresh"])),
        ]
        for (name, result) in runs {
            #expect(result.exitCode != 0, "\(name) exited 0")
            let refusal = "portal-token: error: the listener on 127.0.0.1:\(listener.port) belongs to another user"
            #expect(result.stderr.contains(refusal), "\(name): \(result.stderr)")
            #expect(!result.stdout.contains("token-squatted") && !result.stderr.contains("token-squatted"))
        }
        let received = listener.received
        #expect(received.contains("connection"), "the commands never reached the listener")
        #expect(!received.lowercased().contains("authorization"), "\(received)")
        #expect(!received.contains("token-squatted"))
        // The session is kept: nothing about it was Portal's answer.
        #expect(try portal.git.portalToken(["get"]).stdout == "token-squatted\n")
    }
}

@Suite("Commands under the proxy")
struct CommandsUnderProxyTests {
    @Test(
        """
        under exec --proxy, api goes through the proxy with its header and no bearer, and the commands that \
        would use the session refuse: the proxy gets no bearer from them
        """)
    func commandsUnderExecProxy() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-under-proxy")
        #expect(try portal.adopt(token: "token-under-proxy").exitCode == 0)
        var environment = portal.git.environment
        environment["PT"] = ProcessRunner.portalTokenPath
        let result = try ProcessRunner.run(
            ProcessRunner.portalTokenPath,
            [
                "exec", "--proxy", "--", "sh", "-c",
                """
                "$PT" api /api/v3/clients/me; echo "api=$?"
                "$PT" refresh; echo "refresh=$?"
                "$PT" token >/dev/null; echo "token=$?"
                """,
            ], environment: environment, timeout: 60)
        // api's answer came through the proxy, which added the bearer on its way to Portal.
        #expect(result.stdout.contains("\"id\":\"client-1\""), "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("api=0\nrefresh=2\ntoken=2\n"), "\(result.stdout) \(result.stderr)")
        let proxied = portal.requests(to: "/api/v3/clients/me")
        #expect(proxied.count == 1 && proxied.first?.bearerToken == "token-under-proxy")
        #expect(
            result.stderr.contains(
                "portal-token: error: the Portal API host is the proxy that 'exec --proxy' or 'proxy --listen' runs"),
            "\(result.stderr)")
        #expect(result.stderr.contains("hint: send requests to $PORTAL_TOKEN_PROXY_URL"))
        #expect(!result.stdout.contains("token-under-proxy") && !result.stderr.contains("token-under-proxy"))
        // Nothing else reached Portal through the proxy: the other commands sent no request to it.
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1)
        // Outside the proxy the session is there as before.
        #expect(try portal.git.portalToken(["get"]).stdout == "token-under-proxy\n")
    }
}
