import Foundation
import PortalTokenTestSupport
import Testing

/// The hook's path rules (docs/security.md, "Hardening rules"): absolute or `~/`, never looked up in the current
/// directory; one that is missing or not executable is reported with its path.
@Suite("hook paths")
struct HookPathTests {
    /// Ends the adopted session with a 401, which runs the hook.
    static func endSession(_ portal: PortalHarness, token: String, _ changes: [String: String?] = [:]) throws
        -> ProcessResult
    {
        portal.server.registerLiveToken(token)
        #expect(try portal.adopt(token: token).exitCode == 0)
        portal.server.revoke(token)
        var environment = portal.git.environment
        for (name, value) in changes { environment[name] = value }
        return try ProcessRunner.portalToken(["refresh"], environment: environment)
    }

    @Test(
        """
        a relative hook path is a configuration error (exit 2), and a file of that name in the current directory \
        never runs
        """
    )
    func relativePath() throws {
        let portal = try PortalHarness(backend: .file)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-planted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = directory.appendingPathComponent("ran")
        try writeExecutableScript(
            "#!/bin/sh\ntouch '\(marker.path)'\n", to: directory.appendingPathComponent("hook.sh"))
        for relative in ["hook.sh", "./hook.sh", "hooks/../hook.sh", "~hook.sh"] {
            var environment = portal.git.environment
            environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = relative
            let result = try ProcessRunner.run(
                "/bin/sh", ["-c", "cd '\(directory.path)' && exec '\(ProcessRunner.portalTokenPath)' refresh"],
                environment: environment)
            #expect(result.exitCode == 2, "\(relative): \(result.stderr)")
            #expect(
                result.stderr.hasPrefix(
                    """
                    portal-token: error: PORTAL_TOKEN_ON_SESSION_INVALIDATED: the hook path '\(relative)' is not \
                    absolute
                    """
                ))
            #expect(result.stderr.contains("hint: "))
        }
        #expect(!FileManager.default.fileExists(atPath: marker.path))
        #expect(portal.server.requests.isEmpty)
    }

    @Test(
        "a relative hook path or a wrong account-abstraction value leaves git's requests for other hosts alone",
        arguments: [
            ("PORTAL_TOKEN_ON_SESSION_INVALIDATED", "hook.sh", "the hook path 'hook.sh' is not absolute"),
            ("PORTAL_ACCOUNT_ABSTRACTED", "maybe", "PORTAL_ACCOUNT_ABSTRACTED must be true or false"),
        ])
    func portalSettingsOnlyOnThePortalPath(name: String, value: String, message: String) throws {
        let portal = try PortalHarness(backend: .file, extraEnvironment: [name: value])
        let host = GitHarness.uniqueHost("other")
        let stored = try portal.git.portalToken(
            ["store"], stdin: "protocol=https\nhost=\(host)\nusername=alice\npassword=secret-other\n\n")
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        let got = try portal.git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
        #expect(got.exitCode == 0 && got.stdout == "username=alice\npassword=secret-other\n", "\(got.stderr)")
        for (arguments, stdin) in [(["token"], nil), (["get"], portal.portalOrigin + "\n")] {
            let refused = try portal.git.portalToken(arguments, stdin: stdin)
            #expect(refused.exitCode == 2 && refused.stdout.isEmpty, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.hasPrefix("portal-token: error: ") && refused.stderr.contains(message))
        }
        #expect(portal.server.requests.isEmpty)
    }

    @Test("with a relative HOME, the default hook path is relative too: never looked up in the current directory")
    func relativeHomeDefault() throws {
        let portal = try PortalHarness(backend: .file)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-planted-\(UUID().uuidString)")
        let hooks = directory.appendingPathComponent("home/.config/portal-token/hooks")
        try FileManager.default.createDirectory(at: hooks, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = directory.appendingPathComponent("ran")
        try writeExecutableScript(
            "#!/bin/sh\ntouch '\(marker.path)'\n", to: hooks.appendingPathComponent("on-session-invalidated"))
        portal.server.registerLiveToken("token-relative-home")
        #expect(try portal.adopt(token: "token-relative-home").exitCode == 0)
        portal.server.revoke("token-relative-home")
        var environment = portal.git.environment
        environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = nil
        environment["XDG_CONFIG_HOME"] = nil
        environment["HOME"] = "home"
        let result = try ProcessRunner.run(
            "/bin/sh", ["-c", "cd '\(directory.path)' && exec '\(ProcessRunner.portalTokenPath)' refresh"],
            environment: environment)
        #expect(result.exitCode == 3, "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker.path))
    }

    @Test("a ~/ hook path is expanded with HOME and runs")
    func homePath() throws {
        let portal = try PortalHarness(backend: .file)
        let home = try #require(portal.git.environment["HOME"])
        let name = "hook-\(UUID().uuidString)"
        let marker = URL(fileURLWithPath: home).appendingPathComponent(name + ".ran")
        try writeExecutableScript(
            "#!/bin/sh\necho \"$PORTAL_SESSION_END_REASON\" > '\(marker.path)'\n",
            to: URL(fileURLWithPath: home).appendingPathComponent(name))
        defer {
            try? FileManager.default.removeItem(atPath: home + "/" + name)
            try? FileManager.default.removeItem(at: marker)
        }
        let result = try Self.endSession(
            portal, token: "token-home", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": "~/" + name])
        #expect(result.exitCode == 3, "\(result.stderr)")
        #expect((try? String(contentsOf: marker, encoding: .utf8)) == "unauthorized\n")
    }

    @Test("a hook that is not executable, or missing, is reported with its path and keeps the exit code")
    func notExecutableOrMissing() throws {
        let portal = try PortalHarness(backend: .file)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-hooks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = directory.appendingPathComponent("plain-hook")
        try "#!/bin/sh\nexit 0\n".write(to: plain, atomically: false, encoding: .utf8)
        let notExecutable = try Self.endSession(
            portal, token: "token-plain", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": plain.path])
        #expect(notExecutable.exitCode == 3)
        #expect(
            notExecutable.stderr.contains(
                """
                portal-token: warning: the on-session-invalidated hook \(plain.path) is not an executable file; it \
                was not run
                """
            ))
        #expect(notExecutable.stderr.contains("hint: make it executable: chmod +x \(plain.path)"))

        let missing = directory.appendingPathComponent("no-such-hook").path
        let result = try Self.endSession(
            portal, token: "token-missing", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": missing])
        #expect(result.exitCode == 3)
        #expect(
            result.stderr.contains("portal-token: warning: the on-session-invalidated hook \(missing) does not exist"))
        #expect(!result.stderr.contains("errno"))
    }

    @Test(
        """
        a hook that others may write, or that another user owns, is reported and never run: it would run their \
        code as you
        """
    )
    func hookOthersMayWrite() throws {
        let portal = try PortalHarness(backend: .file)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-hooks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = directory.appendingPathComponent("ran")
        let hook = directory.appendingPathComponent("hook")
        try writeExecutableScript("#!/bin/sh\ntouch '\(marker.path)'\n", to: hook)
        chmod(hook.path, 0o777)
        let writable = try Self.endSession(
            portal, token: "token-writable", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": hook.path])
        #expect(writable.exitCode == 3)
        #expect(
            writable.stderr.contains(
                """
                portal-token: warning: the on-session-invalidated hook \(hook.path) is writable by other users \
                (mode 777); it was not run
                """
            ))
        #expect(writable.stderr.contains("hint: restrict it with 'chmod go-w \(hook.path)'"))
        #expect(!FileManager.default.fileExists(atPath: marker.path))

        chmod(hook.path, 0o755)
        try #require(geteuid() == 0, "giving the hook away needs root")
        chown(hook.path, 65534, 65534)
        let foreign = try Self.endSession(
            portal, token: "token-foreign", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": hook.path])
        #expect(foreign.exitCode == 3)
        #expect(
            foreign.stderr.contains(
                """
                portal-token: warning: the on-session-invalidated hook \(hook.path) belongs to another user (uid \
                65534); it was not run
                """
            ))
        #expect(!FileManager.default.fileExists(atPath: marker.path))

        // The control: the same hook, owned by the user and closed to others, runs.
        chown(hook.path, 0, 0)
        let own = try Self.endSession(portal, token: "token-own", ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": hook.path])
        #expect(own.exitCode == 3, "\(own.stderr)")
        #expect(FileManager.default.fileExists(atPath: marker.path))
    }

    @Test("the default hook that exists but is not executable is reported, not skipped silently")
    func defaultNotExecutable() throws {
        let portal = try PortalHarness(backend: .file)
        let configHome = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-config-\(UUID().uuidString)")
        let hooks = configHome.appendingPathComponent("portal-token/hooks")
        try FileManager.default.createDirectory(at: hooks, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: configHome) }
        let hook = hooks.appendingPathComponent("on-session-invalidated")
        try "#!/bin/sh\nexit 0\n".write(to: hook, atomically: false, encoding: .utf8)
        let result = try Self.endSession(
            portal, token: "token-default",
            ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": nil, "XDG_CONFIG_HOME": configHome.path])
        #expect(result.exitCode == 3)
        #expect(result.stderr.contains("the on-session-invalidated hook \(hook.path) is not an executable file"))
    }
}
