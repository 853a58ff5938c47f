import Foundation
import PortalTokenCore

/// portal-token signing in against the fake Portal's Client Auth endpoints, with a real store
/// (`PortalHarness`), a redirect URL (loopback on a free port unless given), the magic-link
/// settings, and a fake `xdg-open` and `notify-send` on PATH that record their arguments.
public final class SignInHarness: @unchecked Sendable {
    public let portal: PortalHarness
    public let auth: FakeClientAuth
    public let redirectURL: String
    /// What the fake `xdg-open` and `notify-send` were given, one file per run.
    public let launches: URL

    public static let fromEmail = "noreply@example.com"
    public static let templateID = "template-1"

    public init(
        backend: TestBackend, redirectURL: String? = nil, endUser: FakeClientAuth.EndUser = .init(id: "end-user-1"),
        extraEnvironment: [String: String?] = [:], configure: (inout FakeClientAuth.Options) -> Void = { _ in }
    ) throws {
        let redirect = redirectURL ?? "http://127.0.0.1:\(freeLoopbackPort())/callback"
        var environment: [String: String?] = [
            "PORTAL_REDIRECT_URL": redirect,
            "PORTAL_MAGIC_LINK_FROM_EMAIL": Self.fromEmail,
            "PORTAL_MAGIC_LINK_TEMPLATE_ID": Self.templateID,
            "PORTAL_TOKEN_TRACE": nil, "DISPLAY": nil, "WAYLAND_DISPLAY": nil,
            // A person signs in: git's harness rules git's own prompts out, which would rule out
            // the browser and the two-factor prompt too (docs/settings.md, "Non-interactive callers").
            "GIT_TERMINAL_PROMPT": nil,
        ]
        // The suite's /proc shows command lines: a custom-scheme sign-in runs with the risk accepted
        // (docs/security.md, "The sign-in grant"); a test of the refusal unsets it.
        if LoopbackRedirect(redirectURL: redirect) == nil {
            environment["PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK"] = "true"
        }
        for (name, value) in extraEnvironment { environment[name] = value }
        portal = try PortalHarness(backend: backend, extraEnvironment: environment)
        var options = FakeClientAuth.Options(
            authEnvironmentID: portal.environmentID, redirectURLs: [redirect],
            magicLinkFromEmail: Self.fromEmail, magicLinkTemplateID: Self.templateID,
            endUser: endUser)
        configure(&options)
        auth = FakeClientAuth(server: portal.server, options: options)
        self.redirectURL = redirect
        launches = portal.git.directory.appendingPathComponent("launches")
        try FileManager.default.createDirectory(at: launches, withIntermediateDirectories: true)
        let bin = portal.git.directory.appendingPathComponent("bin")
        for program in ["xdg-open", "notify-send"] {
            // One argument a line, in a file of its own per run.
            try writeExecutableScript(
                """
                #!/bin/sh
                file='\(launches.path)/\(program).'$$
                for argument in "$@"; do printf '%s\\n' "$argument"; done > "$file.tmp"
                mv "$file.tmp" "$file"
                """, to: bin.appendingPathComponent(program))
        }
    }

    public var environment: [String: String] { portal.git.environment }

    /// portal-token with the harness's environment and `changes` to it.
    @discardableResult
    public func run(_ arguments: [String], stdin: String? = nil, _ changes: [String: String?] = [:]) throws
        -> ProcessResult
    {
        try ProcessRunner.portalToken(arguments, stdin: stdin, environment: environment(changes))
    }

    public func start(_ arguments: [String], stdin: String? = nil, _ changes: [String: String?] = [:]) throws
        -> RunningProcess
    {
        try RunningProcess(ProcessRunner.portalTokenPath, arguments, environment: environment(changes), stdin: stdin)
    }

    public func startOnTerminal(_ arguments: [String], _ changes: [String: String?] = [:]) throws -> TerminalProcess {
        try TerminalProcess(ProcessRunner.portalTokenPath, arguments, environment: environment(changes))
    }

    public func environment(_ changes: [String: String?]) -> [String: String] {
        var environment = self.environment
        for (name, value) in changes { environment[name] = value }
        return environment
    }

    /// The link the fake "emailed" last, waiting for it up to `timeout` seconds.
    public func sentLink(timeout: Double = 20) throws -> String {
        let deadline = ProcessRunner.monotonicSeconds() + timeout
        while ProcessRunner.monotonicSeconds() < deadline {
            if let link = auth.sentLinks.last?.link { return link }
            usleep(20_000)
        }
        throw ProcessTimeout(command: "no magic link was sent", seconds: timeout)
    }

    /// The arguments each run of a fake desktop program got.
    public func launched(_ program: String) -> [[String]] {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: launches.path)) ?? [])
            .filter { $0.hasPrefix(program + ".") && !$0.hasSuffix(".tmp") }.sorted()
        return files.map { name in
            ((try? String(contentsOfFile: launches.appendingPathComponent(name).path, encoding: .utf8)) ?? "")
                .split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        }
    }

    /// Waits for the fake `xdg-open` to be run and returns the URL it was given.
    public func openedURL(timeout: Double = 20) throws -> String {
        let deadline = ProcessRunner.monotonicSeconds() + timeout
        while ProcessRunner.monotonicSeconds() < deadline {
            if let first = launched("xdg-open").first, first.count == 1 { return first[0] }
            usleep(20_000)
        }
        throw ProcessTimeout(command: "xdg-open was not run", seconds: timeout)
    }

    public func requests(to endpoint: ClientAuthEndpoint) -> [FakePortalServer.Request] {
        portal.requests(to: endpoint.path)
    }
}
