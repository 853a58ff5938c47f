import Foundation
import PortalHTTP
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The documented command that starts the fake Portal by hand for trying sign-in.
@Suite("portal-fake-server by hand")
struct FakeServerCommandTests {
    @Test("one command serves sign-in and shows where each magic link went")
    func magicLinkByHand() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fake-server-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let binary = URL(fileURLWithPath: ProcessRunner.portalTokenPath).deletingLastPathComponent()
            .appendingPathComponent("portal-fake-server").path
        let redirectURL = "http://127.0.0.1:\(freeLoopbackPort())/callback"
        let stdout = directory + "/stdout", outbox = directory + "/outbox"
        let pid = try ProcessRunner.spawn(
            binary, ["--auth-env", "env-hand", "--redirect-url", redirectURL, "--outbox", outbox],
            environment: ProcessRunner.environment(), stdout: stdout, stderr: directory + "/stderr")
        defer {
            kill(pid, SIGTERM)
            _ = ProcessRunner.wait(pid, timeout: 10)
        }
        func lines() -> [String] {
            ((try? String(contentsOfFile: stdout, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let deadline = ProcessRunner.monotonicSeconds() + 20
        while lines().isEmpty, ProcessRunner.monotonicSeconds() < deadline { usleep(20_000) }
        let baseURL = try #require(lines().first)
        let apiHost = String(baseURL.dropFirst("http://".count))
        let base = try PortalAPIBase(apiHost: apiHost)
        let client = ClientAuthClient(
            api: ClientAuthAPI(
                configuration: try ClientAuthConfiguration(
                    authEnvironmentID: "env-hand", redirectURL: redirectURL,
                    magicLinkFromEmail: "noreply@example.com", magicLinkTemplateID: "t-1"),
                apiBase: base, builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0")),
            transport: CurlTransport(options: HTTPTransportOptions()))
        #expect(try client.methods().allowed == [.emailMagicLink, .google, .apple])
        try client.sendMagicLink(email: "you@example.com")
        while !lines().contains(where: { $0.hasPrefix("magic link: ") }), ProcessRunner.monotonicSeconds() < deadline {
            usleep(20_000)
        }
        let printed = try #require(lines().first { $0.hasPrefix("magic link: ") }).dropFirst("magic link: ".count)
        #expect(printed.hasPrefix(redirectURL + "?token=grant-"))
        #expect(try String(contentsOfFile: outbox, encoding: .utf8) == printed + "\n")
        guard case .exchange(let grant, let endpoint) = RedirectURL.evaluate(String(printed), configured: redirectURL)
        else {
            Issue.record("the printed link is not a sign-in redirect")
            return
        }
        guard case .authenticated(let session) = try client.exchange(grant: grant, at: endpoint) else {
            Issue.record("expected a session")
            return
        }
        #expect(session.endUserID == "end-user-1")
        // The session is live on the same fake, as `get` and `status` will find it.
        let me = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0")
            .request("GET", base.url(path: "/api/v3/clients/me"), bearer: session.token)
        #expect(try CurlTransport(options: HTTPTransportOptions()).send(me).status == 200)
    }
}
