import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Synchronization
import Testing

/// `login`'s loopback listener against hostile local clients and web pages (docs/security.md, "Hardening rules").
@Suite("login's listener under attack")
struct ListenerHardeningTests {
    @Test("login completes with an idle connection held open and a client trickling a byte every 40 ms")
    func idleAndTricklingClients() throws {
        let harness = try SignInHarness(backend: .file)
        let login = try harness.start(["login", "--email", "user@example.com", "--timeout", "30"])
        try login.waitForStderr(containing: "waiting for the browser")
        let port = try #require(UInt16(harness.redirectURL.split(separator: ":").last!.prefix { $0.isNumber }))
        let idle = try SimulatedBrowser.connect(port: port)
        defer { close(idle) }
        let trickle = try SimulatedBrowser.connect(port: port)
        defer { close(trickle) }
        _ = "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".withCString {
            send(trickle, $0, strlen($0), Int32(MSG_NOSIGNAL))
        }
        let stop = Mutex(false)
        let thread = Thread {
            while !stop.withLock({ $0 }) {
                _ = "x".withCString { send(trickle, $0, 1, Int32(MSG_NOSIGNAL)) }
                usleep(40_000)
            }
        }
        thread.start()
        defer { stop.withLock { $0 = true }; while !thread.isFinished { usleep(10_000) } }
        usleep(300_000)
        let started = ProcessRunner.monotonicSeconds()
        let page = try SimulatedBrowser.get(try harness.sentLink())
        #expect(page.status == 200 && page.body.contains("Signed in"))
        #expect(ProcessRunner.monotonicSeconds() - started < 5)
        let result = try login.finish()
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
    }

    @Test("a forged callback that Portal refuses is reported, and login goes on to complete with the real one")
    func forgedCallback() throws {
        let harness = try SignInHarness(backend: .file)
        let login = try harness.start(["login", "--google", "--no-browser", "--timeout", "30"])
        let stderr = try login.waitForStderr(containing: "waiting for the browser")
        let authorizeURL = try #require(
            stderr.split(separator: "\n").first { $0.hasPrefix("http://") }.map(String.init))
        // What any web page can make the browser request.
        let forged = try SimulatedBrowser.get(harness.redirectURL + "?token=x&login_type=GOOGLE")
        #expect(forged.status == 400)
        let errorParameter = try SimulatedBrowser.get(
            harness.redirectURL + "?token=x&login_type=GOOGLE&error=access_denied")
        #expect(errorParameter.status == 400)
        try login.waitForStderr(containing: "a sign-in that reached the listener was refused")
        let back = try SimulatedBrowser.followProvider(authorizeURL)
        #expect(try SimulatedBrowser.get(back).status == 200)
        let result = try login.finish()
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stderr.contains("signed in as end-user-1"))
        #expect(!result.stderr.contains("token=x"))
        #expect(harness.auth.acceptedExchanges == 1)
    }
}
