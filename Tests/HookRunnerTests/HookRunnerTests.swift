import Foundation
import Glibc
import HookRunner
import PortalTokenCore
import Testing

/// A temporary directory with hook scripts and a file that stands in for portal-token's stderr.
final class HookScratch {
    let directory: String
    let outputPath: String
    let output: Int32

    init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-hook-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        outputPath = directory + "/stderr"
        output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    }

    /// Writes an executable shell script and returns its path.
    func script(_ name: String, _ body: String, mode: Int = 0o755) throws -> String {
        // Written through a close-on-exec descriptor: a write descriptor inherited by a child
        // that another test spawns at that moment would make exec fail with ETXTBSY.
        let path = directory + "/" + name
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode))
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let bytes = Array(("#!/bin/sh\n" + body + "\n").utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == bytes.count else { throw POSIXError(.EIO) }
        return path
    }

    var written: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    func runner(
        timeoutMilliseconds: Int = 10_000, graceMilliseconds: Int = 2_000,
        parent: [String: String] = ["PATH": "/usr/bin:/bin"]
    ) -> RetryingLauncher {
        RetryingLauncher(
            runner: HookRunner(
                timeoutMilliseconds: timeoutMilliseconds, terminationGraceMilliseconds: graceMilliseconds,
                outputDescriptor: output, parentEnvironment: parent))
    }

    deinit {
        close(output)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Tests write a script and run it at once while other tests spawn processes in parallel; a
/// child spawned in that instant still holds the script's write descriptor until its exec, and
/// the kernel answers ETXTBSY. A user's hook is never written while it runs, so only tests retry.
struct RetryingLauncher {
    let runner: HookRunner

    func run(executable: String, variables: [String: String]) -> HookOutcome {
        var outcome = runner.run(executable: executable, variables: variables)
        for _ in 0..<20 where outcome == .couldNotStart(errorNumber: ETXTBSY) {
            usleep(5_000)
            outcome = runner.run(executable: executable, variables: variables)
        }
        return outcome
    }
}

@Suite("hook runner")
struct HookRunnerTests {
    static let event = SessionEndedEvent(authEnvironmentID: "env-1", endUserID: "user-1", reason: .unauthorized)

    static let parent: [String: String] = [
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/ada", "LANG": "en_GB.UTF-8", "LC_ALL": "C.UTF-8",
        "LC_TIME": "en_DK.UTF-8", "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus", "XDG_RUNTIME_DIR": "/run/user/1000",
        "PORTAL_TOKEN_PASSPHRASE": "canary-passphrase", "SECRET_CANARY": "canary-secret-value",
        "PORTAL_TOKEN_PASSPHRASE_FILE": "/run/canary", "PORTAL_API_HOST": "api.portalhq.io",
        "GITHUB_TOKEN": "canary-github", "LD_PRELOAD": "/canary.so", "SSH_AUTH_SOCK": "/tmp/canary",
        "LCX": "not-a-locale",
    ]

    @Test("the hook's environment is the session variables plus PATH, HOME, locale and display, nothing else")
    func scrubbedEnvironment() throws {
        let scratch = try HookScratch()
        // env itself as the hook: no shell adds PWD or SHLVL to what is printed.
        let outcome = scratch.runner(parent: Self.parent).run(
            executable: "/usr/bin/env", variables: Self.event.environment)
        #expect(outcome == .exited(status: 0))
        var seen: [String: String] = [:]
        for line in scratch.written.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            seen[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        #expect(
            seen == [
                "PORTAL_AUTH_ENVIRONMENT_ID": "env-1", "PORTAL_END_USER_ID": "user-1",
                "PORTAL_SESSION_END_REASON": "unauthorized",
                "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/ada", "LANG": "en_GB.UTF-8", "LC_ALL": "C.UTF-8",
                "LC_TIME": "en_DK.UTF-8", "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0",
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus", "XDG_RUNTIME_DIR": "/run/user/1000",
            ])
        #expect(!scratch.written.contains("canary"))
    }

    @Test("with no PATH to inherit the hook still gets a standard one")
    func fallbackPath() {
        let environment = HookRunner.environment(variables: ["PORTAL_END_USER_ID": "u"], parent: ["SECRET": "x"])
        #expect(environment == ["PATH": HookRunner.fallbackPath, "PORTAL_END_USER_ID": "u"])
    }

    @Test("the hook's stdin is /dev/null")
    func stdinIsDevNull() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script("stdin", #"readlink /proc/self/fd/0; cat; echo "read to end""#)
        #expect(scratch.runner().run(executable: hook, variables: [:]) == .exited(status: 0))
        #expect(scratch.written == "/dev/null\nread to end\n")
    }

    @Test("the hook's stdout and stderr both go to portal-token's stderr")
    func outputGoesToStderr() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script(
            "output",
            """
            echo "to stdout"
            echo "to stderr" >&2
            readlink /proc/self/fd/1
            readlink /proc/self/fd/2
            """)
        #expect(scratch.runner().run(executable: hook, variables: [:]) == .exited(status: 0))
        // Both through one pipe that portal-token copies on.
        let lines = scratch.written.split(separator: "\n").map(String.init)
        #expect(lines.prefix(2) == ["to stdout", "to stderr"])
        #expect(lines.count == 4 && lines[2] == lines[3] && lines[2].hasPrefix("pipe:"))
        #expect(HookRunner().outputDescriptor == STDERR_FILENO)
    }

    @Test("the hook gets no arguments")
    func noArguments() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script("arguments", #"echo "$# arguments""#)
        _ = scratch.runner().run(executable: hook, variables: [:])
        #expect(scratch.written == "0 arguments\n")
    }

    @Test("the hook starts with no signal blocked or ignored and none of portal-token's open files")
    func cleanProcessState() throws {
        let scratch = try HookScratch()
        var leaked: [Int32] = []
        for _ in 0..<8 { leaked.append(open("/dev/null", O_RDONLY)) }
        defer { for descriptor in leaked { close(descriptor) } }
        let hook = try scratch.script("state", "grep -E '^Sig(Blk|Ign)' /proc/self/status; exec ls /proc/self/fd")
        #expect(scratch.runner().run(executable: hook, variables: [:]) == .exited(status: 0))
        let lines = scratch.written.split(separator: "\n").map(String.init)
        #expect(lines.contains("SigBlk:\t0000000000000000"))
        // Signals 1–31 and the real-time ones from 34 up are at their defaults; 32 and 33 are
        // glibc's own (thread cancellation, setxid), which posix_spawn may not reset.
        let ignored = lines.first { $0.hasPrefix("SigIgn:") }.flatMap {
            UInt64($0.dropFirst("SigIgn:\t".count), radix: 16)
        }
        #expect(ignored.map { $0 & ~UInt64(0x1_8000_0000) } == 0, "\(lines)")
        let descriptors = Set(lines.compactMap { Int32($0) })
        // 0, 1, 2, and the one ls opened to list the directory.
        #expect(descriptors.isSubset(of: [0, 1, 2, 3]), "\(descriptors)")
        #expect(leaked.filter { $0 > 3 }.allSatisfy { !descriptors.contains($0) })
    }

    @Test("a failing hook is reported with its exit status")
    func exitStatus() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script("fails", "exit 3")
        let outcome = scratch.runner().run(executable: hook, variables: [:])
        #expect(outcome == .exited(status: 3))
        #expect(!outcome.succeeded)
        #expect(outcome.failureMessage == "the on-session-invalidated hook exited with status 3")
        #expect(HookOutcome.exited(status: 0).failureMessage == nil)
    }

    @Test("a hook killed by a signal is reported with the signal")
    func signalled() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script("killed", "kill -KILL $$")
        let outcome = scratch.runner().run(executable: hook, variables: [:])
        #expect(outcome == .signalled(signal: SIGKILL))
        #expect(outcome.failureMessage == "the on-session-invalidated hook was killed by signal 9")
    }

    @Test("a missing hook, and one that is not executable, are reported with their path, not thrown")
    func couldNotStart() throws {
        let scratch = try HookScratch()
        let missing = scratch.runner().run(executable: scratch.directory + "/missing", variables: [:])
        #expect(missing == .missing)
        #expect(
            missing.failureMessage(path: "/x/missing") == "the on-session-invalidated hook /x/missing does not exist")
        let notExecutable = try scratch.script("plain", "exit 0", mode: 0o644)
        let outcome = scratch.runner().run(executable: notExecutable, variables: [:])
        #expect(outcome == .notExecutable)
        #expect(
            outcome.failureMessage(path: notExecutable)
                == "the on-session-invalidated hook \(notExecutable) is not an executable file; it was not run")
        #expect(scratch.runner().run(executable: scratch.directory, variables: [:]) == .notExecutable)
        #expect(
            HookOutcome.couldNotStart(errorNumber: ENOEXEC).failureMessage(path: "/h")
                == "the on-session-invalidated hook /h could not be started (Exec format error)")
    }

    @Test(
        """
        a grandchild that leaves the group (setsid) and keeps the output open holds the run past neither the drain \
        nor the bound
        """
    )
    func setsidGrandchild() throws {
        let scratch = try HookScratch()
        let pidFile = scratch.directory + "/escaped.pid"
        // Exits at once, leaving a session leader of its own that holds stdout and stderr.
        let quick = try scratch.script(
            "daemonizes", "echo before; setsid sh -c 'echo $$ > \(pidFile); exec sleep 30' & exit 0")
        var started = ContinuousClock.now
        #expect(
            scratch.runner(timeoutMilliseconds: 10_000).run(executable: quick, variables: [:]) == .exited(status: 0))
        #expect(ContinuousClock.now - started < .seconds(3))
        #expect(scratch.written.hasPrefix("before\n"))
        // One that also outlives its bound while the grandchild holds the pipe.
        let slowPidFile = scratch.directory + "/escaped-slow.pid"
        let slow = try scratch.script(
            "daemonizes-slow", "setsid sh -c 'echo $$ > \(slowPidFile); exec sleep 30' & sleep 30")
        started = ContinuousClock.now
        #expect(
            scratch.runner(timeoutMilliseconds: 300, graceMilliseconds: 300).run(executable: slow, variables: [:])
                == .timedOut(milliseconds: 300))
        #expect(ContinuousClock.now - started < .seconds(3))
        for file in [pidFile, slowPidFile] {
            if let escaped = Int32(
                (try? String(contentsOfFile: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
                    ?? "")
            {
                kill(escaped, SIGKILL)
            }
        }
    }

    @Test("a hook past its timeout is stopped together with its children")
    func timeoutKillsProcessGroup() throws {
        let scratch = try HookScratch()
        let pidFile = scratch.directory + "/child.pid"
        let hook = try scratch.script("slow", "sleep 30 & echo $! > '\(pidFile)'; wait")
        let started = ContinuousClock.now
        let outcome = scratch.runner(timeoutMilliseconds: 200, graceMilliseconds: 500).run(
            executable: hook, variables: [:])
        let elapsed = ContinuousClock.now - started
        #expect(outcome == .timedOut(milliseconds: 200))
        #expect(outcome.failureMessage == "the on-session-invalidated hook was stopped after 200 ms")
        #expect(elapsed >= .milliseconds(200))
        #expect(elapsed < .seconds(5))
        let child = try #require(
            Int32(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(Self.isGone(child))
    }

    @Test("a hook that ignores SIGTERM is killed after the grace period")
    func timeoutEscalatesToKill() throws {
        let scratch = try HookScratch()
        let hook = try scratch.script("stubborn", "trap '' TERM; sleep 30")
        let started = ContinuousClock.now
        let outcome = scratch.runner(timeoutMilliseconds: 100, graceMilliseconds: 300).run(
            executable: hook, variables: [:])
        let elapsed = ContinuousClock.now - started
        #expect(outcome == .timedOut(milliseconds: 100))
        #expect(elapsed >= .milliseconds(400))
        #expect(elapsed < .seconds(5))
    }

    @Test("the default bound is 30 seconds")
    func defaultTimeout() {
        #expect(HookRunner().timeoutMilliseconds == 30_000)
    }

    /// Whether a process has exited: gone from /proc, or a zombie waiting for a reaper.
    /// SIGKILL lands at once but the exit is asynchronous, so this looks for up to 2 s.
    static func isGone(_ pid: Int32) -> Bool {
        for _ in 0..<200 {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            if let close = stat.lastIndex(of: ")"), stat[stat.index(close, offsetBy: 2)] == "Z" { return true }
            usleep(10_000)
        }
        return false
    }
}

@Suite("session-ended event")
struct SessionEndedEventTests {
    @Test("the event carries exactly the three contract variables")
    func variables() {
        let event = SessionEndedEvent(authEnvironmentID: "env", endUserID: "user", reason: .expired)
        #expect(
            event.environment == [
                "PORTAL_AUTH_ENVIRONMENT_ID": "env", "PORTAL_END_USER_ID": "user",
                "PORTAL_SESSION_END_REASON": "expired",
            ])
    }
}
