import Foundation
import PortalTokenCore

/// portal-token signed in (or not) against a fake Portal server on loopback, with real git, a
/// real store and an on-session-invalidated hook that records each run.
public final class PortalHarness: @unchecked Sendable {
    public let git: GitHarness
    public let server: FakePortalServer
    public let environmentID = "env-\(UInt32.random(in: 0...UInt32.max))"
    public let hookLog: URL
    public let hookEnvironment: URL

    public init(backend: TestBackend, git gitVersion: RealGit = .debian12, extraEnvironment: [String: String?] = [:])
        throws
    {
        server = try FakePortalServer()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-hook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        hookLog = scratch.appendingPathComponent("runs")
        hookEnvironment = scratch.appendingPathComponent("environment")
        let hook = scratch.appendingPathComponent("on-session-invalidated")
        // Records each run and its whole environment, and writes to both of its outputs, which
        // must both reach portal-token's stderr.
        try writeExecutableScript(
            """
            #!/bin/sh
            echo "$PORTAL_SESSION_END_REASON $PORTAL_END_USER_ID $PORTAL_AUTH_ENVIRONMENT_ID" >> '\(hookLog.path)'
            env > '\(hookEnvironment.path)'
            read line && echo "hook read stdin: $line" >> '\(hookLog.path)'
            echo hook-stdout-marker
            echo hook-stderr-marker >&2
            """, to: hook)
        var environment: [String: String?] = [
            "PORTAL_AUTH_ENVIRONMENT_ID": environmentID,
            "PORTAL_API_HOST": "127.0.0.1:\(server.port)",
            "PORTAL_TOKEN_ON_SESSION_INVALIDATED": hook.path,
        ]
        for (name, value) in extraEnvironment { environment[name] = value }
        git = try GitHarness(backend: backend, git: gitVersion, extraEnvironment: environment)
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(at: hookLog.deletingLastPathComponent())
    }

    /// git's protocol and host for the configured API.
    public var portalOrigin: String { "protocol=http\nhost=127.0.0.1:\(server.port)\n" }

    /// Adopts `token` for `endUserID` the way a user does: a credential-protocol store.
    public func adopt(token: String, endUserID: String = "user-1") throws -> ProcessResult {
        try git.portalToken(["store"], stdin: portalOrigin + "username=\(endUserID)\npassword=\(token)\n")
    }

    /// The hook's runs so far, one line each.
    public var hookRuns: [String] {
        ((try? String(contentsOf: hookLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Runs portal-token with the wall clock moved by `seconds` (contrib/testing/wallclock-shift.c,
    /// built by the test script and named by PORTAL_TOKEN_TEST_CLOCK_SHIM).
    public func portalToken(_ arguments: [String], stdin: String? = nil, clockShift seconds: Int64) throws
        -> ProcessResult
    {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, arguments, stdin: stdin,
            environment: try environment(clockShift: seconds), timeout: 30)
    }

    /// The helper's environment with the wall clock moved by `seconds`, for portal-token or for
    /// git and the portal-token it runs.
    public func environment(clockShift seconds: Int64) throws -> [String: String] {
        guard let shim = ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_CLOCK_SHIM"] else {
            throw SpawnFailure(
                executable: "PORTAL_TOKEN_TEST_CLOCK_SHIM is not set: run the suite through contrib/test.sh", code: 0)
        }
        var environment = git.environment
        environment["LD_PRELOAD"] = shim
        environment["PORTAL_TOKEN_TEST_CLOCK_SHIFT"] = String(seconds)
        return environment
    }

    /// The requests the fake server saw for a path.
    public func requests(to path: String) -> [FakePortalServer.Request] {
        server.requests.filter { $0.path == path }
    }
}
