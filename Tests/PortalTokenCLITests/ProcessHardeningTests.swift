import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A process holding a token, a grant or a passphrase can be neither dumped to a core file nor
/// read through /proc by another process of the same user, and the programs it starts get the
/// caller's core-file limits back (docs/security.md, "Hardening rules").
@Suite("process hardening")
struct ProcessHardeningTests {
    /// The caller's core-file limits in these tests, soft and hard, in bytes: neither is 0, so
    /// both what portal-token lowers and what it leaves alone show.
    static let callerSoftLimit = 1_048_576
    static let callerHardLimit = 2_097_152

    /// `prlimit` with the caller's limits, then `command`.
    static func withCallerLimits(_ command: [String], hard: String = "\(callerHardLimit)") -> [String] {
        ["--core=\(callerSoftLimit):\(hard)"] + command
    }

    @Test(
        """
        portal-token started by an unprivileged user has a soft RLIMIT_CORE of 0, the caller's hard limit, and a \
        /proc/PID/environ owned by root
        """,
        arguments: BinaryTests.binaries)
    func noCoreDumps(binary: String) throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-dump-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        // get waits on its request; holding the FIFO's write end keeps it waiting while it is looked at.
        let fifo = scratch.appendingPathComponent("stdin").path
        #expect(mkfifo(fifo, 0o666) == 0)
        chmod(fifo, 0o666)
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let pid = try ProcessRunner.spawn(
            "/usr/bin/prlimit",
            Self.withCallerLimits([
                "/usr/bin/setpriv", "--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups", binary,
                "get",
            ]),
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"], stdin: fifo)
        defer { kill(pid, SIGKILL); _ = waitpid(pid, nil, 0) }

        // Once the child runs portal-token as nobody, both must hold before it reads a byte.
        let deadline = ProcessRunner.monotonicSeconds() + 10
        var coreLimit = ""
        var environOwner: uid_t = nobody.pw_uid
        while ProcessRunner.monotonicSeconds() < deadline {
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
            var status = stat()
            if executable.hasSuffix("/portal-token"), stat("/proc/\(pid)/environ", &status) == 0 {
                environOwner = status.st_uid
                let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
                coreLimit =
                    limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
                    .map {
                        $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2).joined(
                            separator: " ")
                    } ?? ""
                if environOwner == 0 && coreLimit == "0 \(Self.callerHardLimit)" { break }
            }
            usleep(10_000)
        }
        // No core file: the soft limit is 0 (and the process is not dumpable); the hard limit is
        // the caller's, which the programs portal-token starts get back.
        #expect(coreLimit == "0 \(Self.callerHardLimit)")
        #expect(environOwner == 0)
        // The process itself does run as nobody: the ownership above is PR_SET_DUMPABLE's doing.
        var credentials = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        credentials = credentials.split(separator: "\n").first { $0.hasPrefix("Uid:") }.map(String.init) ?? ""
        #expect(credentials.split(separator: "\t").dropFirst().first == "\(nobody.pw_uid)")
    }

    @Test(
        """
        exec's command, the hook and a desktop program get the caller's core-file limits, soft and hard, not \
        portal-token's own
        """)
    func childrenGetTheCallersLimits() throws {
        let report = "ulimit -Hc; ulimit -c"
        for hard in ["\(Self.callerHardLimit)", "unlimited"] {
            // What the caller's own shell sees: the limits every child must see too.
            let expected = try ProcessRunner.run(
                "/usr/bin/prlimit", Self.withCallerLimits(["/bin/sh", "-c", report], hard: hard))
            #expect(expected.exitCode == 0 && expected.stdout.split(separator: "\n").count == 2, "\(expected)")

            // exec: the command replaces portal-token.
            let portal = try PortalHarness(backend: .file)
            #expect(try portal.adopt(token: "token-limits").exitCode == 0)
            let exec = try ProcessRunner.run(
                "/usr/bin/prlimit",
                Self.withCallerLimits(
                    [ProcessRunner.portalTokenPath, "exec", "--", "/bin/sh", "-c", report], hard: hard),
                environment: portal.git.environment)
            #expect(exec.exitCode == 0, "\(exec.stderr)")
            #expect(exec.stdout == expected.stdout, "exec's command")

            // The hook: Portal refuses the token, so the session ends and the hook runs.
            let scratch = try ScratchFolder("limits")
            let hook = "\(scratch.path)/on-session-invalidated"
            try writeExecutableScript(
                "#!/bin/sh\n(\(report)) > '\(scratch.path)/hook'\n", to: URL(fileURLWithPath: hook))
            var environment = portal.git.environment
            environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = hook
            let api = try ProcessRunner.run(
                "/usr/bin/prlimit",
                Self.withCallerLimits([ProcessRunner.portalTokenPath, "api", "/api/v3/clients/me"], hard: hard),
                environment: environment)
            #expect(api.exitCode == 3, "\(api.stderr)")
            #expect(scratch.read("hook") == expected.stdout, "the hook")

            // A desktop program (notify-send, as xdg-open and git are started).
            let harness = try SignInHarness(
                backend: .file, redirectURL: "portalexample://auth/callback", extraEnvironment: ["DISPLAY": ":99"])
            try writeExecutableScript(
                "#!/bin/sh\n(\(report)) > '\(scratch.path)/notify'\n",
                to: harness.portal.git.directory.appendingPathComponent("bin/notify-send"))
            let link = FakeClientAuth.redirect(
                harness.redirectURL, grant: harness.auth.issueGrant(method: .google), method: .google)
            let redirect = try ProcessRunner.run(
                "/usr/bin/prlimit",
                Self.withCallerLimits([ProcessRunner.portalTokenPath, "redirect", "-"], hard: hard),
                stdin: link + "\n", environment: harness.environment)
            #expect(redirect.exitCode == 0, "\(redirect.stderr)")
            #expect(scratch.read("notify") == expected.stdout, "notify-send")
        }
    }
}
