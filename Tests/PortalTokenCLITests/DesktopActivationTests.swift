import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The desktop route for a custom-scheme redirect: the session bus starts the handler and hands
/// it the URL in `org.freedesktop.Application.Open`, so the single-use grant never sits in
/// portal-token's command line, which another local user could read, and the handler answers
/// before it exchanges the grant, so a launcher that holds the URL in its own exits at once
/// (docs/security.md, "Hardening rules").
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
        // Open is answered before the exchange: the sign-in finishes after it.
        let get = try Self.signedIn(harness)
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

    /// `get` once the handler has stored the session of the last token Portal issued and sent
    /// its `notifications`th notification, within 30 seconds (the last `get` when it never does).
    static func signedIn(_ harness: SignInHarness, notifications: Int = 1) throws -> ProcessResult {
        let deadline = ProcessRunner.monotonicSeconds() + 30
        var get = try harness.run(["get"])
        while get.exitCode != 0 || get.stdout != (harness.auth.issuedTokens.last ?? "") + "\n"
            || harness.launched("notify-send").count < notifications,
            ProcessRunner.monotonicSeconds() < deadline
        {
            usleep(20_000)
            get = try harness.run(["get"])
        }
        return get
    }

    /// When the launcher had exited, as seen by the fake Portal while it holds the exchange.
    final class LauncherExit: @unchecked Sendable {
        private let lock = NSLock()
        private var exitedAt: Double?
        private(set) var goneWhenExchanged: Bool?

        func exited(at time: Double) {
            lock.lock()
            exitedAt = time
            lock.unlock()
        }

        var time: Double? {
            lock.lock()
            defer { lock.unlock() }
            return exitedAt
        }

        /// Holds the exchange's answer until the launcher has exited, within `timeout` seconds:
        /// a handler that answered `Open` only after the exchange keeps the launcher waiting
        /// until then, and so is caught here.
        func holdExchange(timeout: Double) {
            let deadline = ProcessRunner.monotonicSeconds() + timeout
            while time == nil && ProcessRunner.monotonicSeconds() < deadline { usleep(1000) }
            lock.lock()
            goneWhenExchanged = exitedAt != nil
            lock.unlock()
        }
    }

    /// What a Chromium-based browser does with a custom-scheme redirect: it runs `xdg-open URL`,
    /// which on GNOME runs `gio open URL`, which calls `Open` on the D-Bus-activated handler and
    /// waits for its reply. The URL sits in both launchers' command lines for as long as they
    /// run; the handler replies before it exchanges the grant, so that is as short as D-Bus
    /// activation allows (docs/security.md, "Hardening rules"; docs/signing-in.md, "Which browsers
    /// put the URL on a command line").
    @Test(
        """
        through the real xdg-open and gio open: the launcher exits before the exchange is answered, and the grant \
        shows in no argv but the launchers'
        """)
    func throughXDGOpenAndGIO() throws {
        // Requests wait longer than the fake Portal holds the exchange below.
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback",
            extraEnvironment: ["DISPLAY": ":99", "PORTAL_TOKEN_HTTP_TIMEOUT_MS": "60000"])
        let bus = try PrivateApplicationBus(environment: harness.environment)
        try bus.installService(
            named: DesktopRedirectHandler.busName,
            contents: DesktopRedirectHandler.serviceFile(executable: ProcessRunner.portalTokenPath))
        // A desktop of the test's own: the entry in XDG_DATA_HOME, registered as the docs say, a
        // GNOME session (so xdg-open hands the URL to gio), and the private bus as its session bus.
        let desktop = try ScratchFolder("desktop")
        let launcherEnvironment = [
            "PATH": "/usr/bin:/bin", "HOME": desktop.path, "XDG_DATA_HOME": desktop.path + "/data",
            "XDG_CONFIG_HOME": desktop.path + "/config", "XDG_DATA_DIRS": desktop.path + "/none",
            "XDG_CURRENT_DESKTOP": "GNOME", "DBUS_SESSION_BUS_ADDRESS": bus.address,
        ]
        try FileManager.default.createDirectory(
            atPath: desktop.path + "/data/applications", withIntermediateDirectories: true)
        try #require(
            DesktopRedirectHandler.desktopEntry(
                redirectURL: harness.redirectURL, executable: ProcessRunner.portalTokenPath)
        ).write(
            toFile: desktop.path + "/data/applications/" + DesktopRedirectHandler.fileName, atomically: true,
            encoding: .utf8)
        let registration = try #require(DesktopRedirectHandler.registrationCommand(redirectURL: harness.redirectURL))
        let registered = try ProcessRunner.run(
            "/usr/bin/env", registration.split(separator: " ").map(String.init), environment: launcherEnvironment)
        #expect(registered.exitCode == 0, "\(registered.stderr)")

        // Each delivery is a new sign-in with a grant of its own. The first starts the handler
        // through the bus; later ones find it running. A loaded machine may walk /proc too slowly
        // to catch a launcher that lives a few tens of milliseconds, so deliveries go on (five at
        // most) until the sampler has seen the grant once.
        var measured: [String] = []
        var seen: [String] = []
        for delivery in 1...5 {
            let grant = harness.auth.issueGrant(method: .google)
            let link = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)
            let launcher = LauncherExit()
            harness.auth.onAcceptedExchange { launcher.holdExchange(timeout: 20) }
            let sampler = CommandLineSampler(watchingFor: [grant])
            let started = ProcessRunner.monotonicSeconds()
            let opened = try RunningProcess("/usr/bin/xdg-open", [link], environment: launcherEnvironment)
            let result = try opened.finish(timeout: 60)
            launcher.exited(at: ProcessRunner.monotonicSeconds())
            // The sign-in finishes after the launcher has gone.
            let get = try Self.signedIn(harness, notifications: delivery)
            let sampled = sampler.stop()
            let lifetime = ((launcher.time ?? started) - started) * 1000

            #expect(result.exitCode == 0, "xdg-open: \(result.stderr)\n\(bus.stderr)")
            #expect(launcher.goneWhenExchanged == true, "the launcher still waited while the exchange was held")
            #expect(get.exitCode == 0 && get.stdout == (harness.auth.issuedTokens.last ?? "?") + "\n")
            #expect(harness.auth.acceptedExchanges == delivery)
            #expect(!bus.stderr.contains(grant))
            measured.append(
                """
                delivery \(delivery): the launchers ran \(String(format: "%.1f", lifetime)) ms; the grant was in their \
                argv, \(sampler.sightings) of \(sampled.rounds) /proc rounds
                """)
            seen += sampled.commandLines
            if !sampled.commandLines.isEmpty { break }
        }
        print("custom-scheme redirect through xdg-open and gio open:\n" + measured.joined(separator: "\n"))
        #expect(bus.stderr.contains("signed in as end-user-1"), "\(bus.stderr)")
        #expect(harness.launched("notify-send").first?.contains("Signed in to Portal") == true)
        // What a local user reading /proc sees: the grant, in the launchers' argv and nowhere
        // else (not in portal-token's), while the launchers run, which docs/security.md says.
        let launchers = ["/bin/sh /usr/bin/xdg-open ", "gio open "]
        #expect(!seen.isEmpty, "the launchers' argv holds the URL: \(measured)")
        for commandLine in seen {
            #expect(launchers.contains { commandLine.hasPrefix($0) }, "\(commandLine)")
        }
        let security = try String(
            contentsOf: Self.root.appendingPathComponent("docs/security.md"), encoding: .utf8)
        #expect(security.contains("`xdg-open`") && security.contains("`gio open`"))
    }

    /// With the release binary too.
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

    @Test(
        """
        a grant Portal refuses: Open is answered before the exchange, and the refusal goes to stderr and a \
        notification
        """)
    func refusedAfterTheAnswer() throws {
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback", extraEnvironment: ["DISPLAY": ":99"])
        let bus = try PrivateApplicationBus(environment: harness.environment)
        try bus.installService(
            named: DesktopRedirectHandler.busName,
            contents: DesktopRedirectHandler.serviceFile(executable: ProcessRunner.portalTokenPath))
        let grant = harness.auth.issueGrant(method: .google)
        harness.auth.spend(grant)
        let failure = try bus.open(
            [FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)],
            destination: DesktopRedirectHandler.busName, path: DesktopRedirectHandler.objectPath)
        #expect(failure == nil, "the answer comes before the exchange, so it cannot carry the refusal")
        let refusal = "portal-token: error: Portal refused the sign-in grant"
        let deadline = ProcessRunner.monotonicSeconds() + 30
        while harness.launched("notify-send").isEmpty || !bus.stderr.contains(refusal),
            ProcessRunner.monotonicSeconds() < deadline
        {
            usleep(20_000)
        }
        let notification = harness.launched("notify-send").first ?? []
        #expect(notification.contains("Portal sign-in did not finish"), "\(notification)")
        #expect(notification.last?.hasPrefix("Portal refused the sign-in grant") == true, "\(notification)")
        #expect(bus.stderr.contains(refusal), "\(bus.stderr)")
        #expect(!bus.stderr.contains(grant) && !notification.joined().contains(grant))
        #expect(harness.requests(to: .oauthTokens).count == 1)
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
