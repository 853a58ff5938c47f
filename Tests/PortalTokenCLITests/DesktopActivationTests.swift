import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The desktop route for a custom-scheme redirect: the session bus starts the handler and hands
/// it the URL in `org.freedesktop.Application.Open`, so the single-use grant never sits in a
/// command line that another local user could read (docs/security.md, "Hardening rules").
@Suite("the D-Bus-activated desktop handler")
struct DesktopActivationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test(
        "a sign-in delivered through Open completes, and no process's argv ever holds the grant",
        arguments: TestBackend.allCases)
    func openCompletesWithoutArgv(backend: TestBackend) throws {
        // A display, so the outcome is also a notification.
        let harness = try SignInHarness(
            backend: backend, redirectURL: "portalexample://auth/callback", extraEnvironment: ["DISPLAY": ":99"])
        let bus = try PrivateApplicationBus(environment: harness.environment)
        try bus.installService(
            named: DesktopRedirectHandler.busName,
            contents: DesktopRedirectHandler.serviceFile(executable: ProcessRunner.portalTokenPath))
        let grant = harness.auth.issueGrant(method: .google)
        let link = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)

        let sampler = CommandLineSampler(watchingFor: [grant, DesktopRedirectHandler.activationOption])
        let failure = try bus.open(
            [link], destination: DesktopRedirectHandler.busName, path: DesktopRedirectHandler.objectPath)
        let get = try harness.run(["get"])
        let sampled = sampler.stop(minimumRounds: 11)

        #expect(failure == nil, "\(bus.stderr)")
        #expect(get.exitCode == 0 && get.stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
        #expect(harness.auth.acceptedExchanges == 1)
        // The sampler did watch the handler run, and never saw the grant.
        #expect(
            sampled.commandLines.contains { $0.contains("redirect \(DesktopRedirectHandler.activationOption)") },
            "\(sampled)")
        #expect(!sampled.commandLines.contains { $0.contains(grant) }, "\(sampled)")
        #expect(sampled.rounds > 10)
        #expect(bus.stderr.contains("signed in as end-user-1") && !bus.stderr.contains(grant))
        #expect(harness.launched("notify-send").first?.contains("Signed in to Portal") == true)

        // The control: the same sampler does catch the grant on a command line ('redirect URL',
        // a replay here, so nothing is exchanged again). One replay lives a few milliseconds, and
        // a loaded machine may walk /proc more slowly than that, so it is replayed until the
        // sampler has seen it, within a bound.
        let control = CommandLineSampler(watchingFor: [grant])
        let deadline = Date().addingTimeInterval(20)
        var replays = 0
        repeat {
            #expect(try harness.run(["redirect", link]).exitCode == 0)
            replays += 1
        } while !control.commandLinesSoFar.contains(where: { $0.contains(grant) }) && Date() < deadline
        #expect(control.stop().commandLines.contains { $0.contains(grant) }, "not seen in \(replays) replays")
    }

    /// With the release binary too, which loads libsystemd only when it serves the bus.
    @Test(
        "Open with a URL that is not a sign-in redirect is answered with an error, nothing sent",
        arguments: BinaryTests.binaries)
    func openRefusesForeignURL(binary: String) throws {
        let harness = try SignInHarness(backend: .file, redirectURL: "portalexample://auth/callback")
        let bus = try PrivateApplicationBus(environment: harness.environment)
        try bus.installService(
            named: DesktopRedirectHandler.busName,
            contents: DesktopRedirectHandler.serviceFile(executable: binary))
        let failure = try bus.open(
            ["otherapp://auth/callback?token=g&login_type=GOOGLE"],
            destination: DesktopRedirectHandler.busName, path: DesktopRedirectHandler.objectPath)
        #expect(failure?.name == "io.portalhq.PortalToken.Error.Exit7")
        #expect(failure?.message.hasPrefix("the URL is not a sign-in redirect for this configuration") == true)
        #expect(bus.stderr.contains("portal-token: error: the URL is not a sign-in redirect"))
        #expect(harness.portal.server.requests.isEmpty)
        #expect(try harness.run(["get"]).exitCode == 1)
    }

    @Test("the activated handler leaves after 10 idle seconds, giving its name back")
    func leavesWhenIdle() throws {
        let harness = try SignInHarness(backend: .file, redirectURL: "portalexample://auth/callback")
        let bus = try PrivateApplicationBus(environment: harness.environment)
        let handler = try harness.start(["redirect", "--dbus-activated"], ["DBUS_STARTER_ADDRESS": bus.address])
        let result = try handler.finish(timeout: 20)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(harness.portal.server.requests.isEmpty)
        // The name is free again: a call now starts nothing and finds no one.
        let failure = try bus.open(
            ["portalexample://auth/callback?token=g&login_type=GOOGLE"],
            destination: DesktopRedirectHandler.busName, path: DesktopRedirectHandler.objectPath)
        #expect(failure?.name == "org.freedesktop.DBus.Error.ServiceUnknown")
    }

    @Test(
        """
        started by a launcher that ignores DBusActivatable, the handler that receives no URL says so (exit 2, a \
        notification)
        """
    )
    func startedWithoutActivation() throws {
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback", extraEnvironment: ["DISPLAY": ":99"])
        let bus = try PrivateApplicationBus(environment: harness.environment)
        // What a launcher that runs the entry's Exec= line does: no DBUS_STARTER_ADDRESS, no URL.
        let handler = try harness.start(
            ["redirect", "--dbus-activated"],
            ["DBUS_SESSION_BUS_ADDRESS": bus.address, "DBUS_STARTER_ADDRESS": nil])
        let result = try handler.finish(timeout: 20)
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(
            result.stderr.hasPrefix(
                "portal-token: error: no redirect URL arrived: the desktop handler was started without D-Bus activation"
            ))
        #expect(result.stderr.contains("hint: ") && result.stderr.contains("portal-token redirect -"))
        #expect(harness.launched("notify-send").first?.contains("Portal sign-in did not finish") == true)
        #expect(harness.portal.server.requests.isEmpty)
    }

    @Test("without a session bus to serve, --dbus-activated is a configuration error (exit 2) with a hint")
    func noBus() throws {
        let harness = try SignInHarness(backend: .file, redirectURL: "portalexample://auth/callback")
        let result = try harness.run(
            ["redirect", "--dbus-activated"],
            ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus", "DBUS_STARTER_ADDRESS": nil])
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: cannot connect to the session bus"))
        #expect(result.stderr.contains("hint: "))
    }

    @Test("contrib's desktop entry and D-Bus service file, filled in, are the ones the code describes")
    func shippedFiles() throws {
        let template = try String(
            contentsOf: Self.root.appendingPathComponent("contrib/desktop/\(DesktopRedirectHandler.fileName)"),
            encoding: .utf8)
        let filled =
            template.replacingOccurrences(of: "<scheme>", with: "myapp")
            .split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n") + "\n"
        #expect(filled == DesktopRedirectHandler.desktopEntry(redirectURL: "myapp://auth/callback"))
        #expect(
            template.contains(
                try #require(DesktopRedirectHandler.registrationCommand(redirectURL: "myapp://auth/callback"))))
        let service = try String(
            contentsOf: Self.root.appendingPathComponent("contrib/desktop/\(DesktopRedirectHandler.serviceFileName)"),
            encoding: .utf8)
        #expect(
            service.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n") + "\n"
                == DesktopRedirectHandler.serviceFile())
        let install = try String(contentsOf: Self.root.appendingPathComponent("contrib/install.sh"), encoding: .utf8)
        #expect(install.contains(DesktopRedirectHandler.serviceFileName) && install.contains("dbus-1/services"))
        #expect(install.contains(DesktopRedirectHandler.fileName) && install.contains("applications"))
    }
}
