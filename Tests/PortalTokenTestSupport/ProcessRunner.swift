import Foundation
import Glibc

/// What a finished child process left behind.
public struct ProcessResult: Sendable {
    public var exitCode: Int32
    public var stdout: String
    public var stderr: String
    /// How long it ran, in seconds.
    public var duration: Double
}

/// Runs programs as a user would. Children are started with posix_spawn and reaped with
/// waitpid against the monotonic clock: Foundation's Process can miss a child's exit (it then
/// waits forever), and its waiting hangs under faketime. Standard input comes from a file and
/// output goes to files, so no pipe can fill up.
public enum ProcessRunner {
    /// The portal-token binary under test: `PORTAL_TOKEN_BIN`, else the one built beside the tests.
    public static var portalTokenPath: String {
        if let path = ProcessInfo.processInfo.environment["PORTAL_TOKEN_BIN"], !path.isEmpty { return path }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("portal-token").path
    }

    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String] = [], stdin: String? = nil,
        environment: [String: String]? = nil, timeout: Double = 30
    ) throws -> ProcessResult {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let input = stdin.map { scratch.file("in", contents: $0) } ?? "/dev/null"
        let started = monotonicSeconds()
        let pid = try spawn(
            executable, arguments, environment: environment ?? ProcessInfo.processInfo.environment,
            stdin: input, stdout: scratch.path("out"), stderr: scratch.path("err"))
        guard let status = wait(pid, timeout: timeout) else {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
            throw ProcessTimeout(command: ([executable] + arguments).joined(separator: " "), seconds: timeout)
        }
        return ProcessResult(
            exitCode: status, stdout: scratch.read("out"), stderr: scratch.read("err"),
            duration: monotonicSeconds() - started)
    }

    /// Runs portal-token itself.
    @discardableResult
    public static func portalToken(
        _ arguments: [String], stdin: String? = nil,
        environment: [String: String]? = nil, timeout: Double = 30
    ) throws -> ProcessResult {
        try run(portalTokenPath, arguments, stdin: stdin, environment: environment, timeout: timeout)
    }

    /// The environment of the test process with some variables changed (nil removes one).
    public static func environment(_ changes: [String: String?] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in changes { environment[name] = value }
        return environment
    }

    /// Starts a child and returns its PID; the caller waits for it or kills it.
    public static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String],
        stdin: String = "/dev/null", stdout: String = "/dev/null", stderr: String = "/dev/null"
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = withDefaultSignals { attributes in posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        }
        guard result == 0 else { throw SpawnFailure(executable: executable, code: result) }
        return pid
    }

    /// Waits for `pid` until `timeout` seconds have passed; its exit code (128 + signal when
    /// killed), or nil on time-out.
    public static func wait(_ pid: pid_t, timeout: Double) -> Int32? {
        let deadline = monotonicSeconds() + timeout
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { break }
            if reaped < 0 && errno != EINTR { return -1 }
            if monotonicSeconds() >= deadline { return nil }
            usleep(1000)
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    public static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// A private folder for one child's input and output files.
private struct Scratch {
    let directory: String

    init() throws {
        var template = Array("\(FileManager.default.temporaryDirectory.path)/portal-token-run-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SpawnFailure(executable: "mkdtemp", code: errno)
        }
        directory = String(cString: made)
    }

    func path(_ name: String) -> String { "\(directory)/\(name)" }

    func file(_ name: String, contents: String) -> String {
        _ = FileManager.default.createFile(
            atPath: path(name), contents: Data(contents.utf8), attributes: [.posixPermissions: 0o600])
        return path(name)
    }

    func read(_ name: String) -> String {
        guard let data = FileManager.default.contents(atPath: path(name)) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

public struct ProcessTimeout: Error, CustomStringConvertible {
    public let command: String
    public let seconds: Double
    public var description: String { "\(command) did not finish within \(seconds) s" }
}

public struct SpawnFailure: Error, CustomStringConvertible {
    public let executable: String
    public let code: Int32
    public var description: String { "could not start \(executable): \(String(cString: strerror(code)))" }
}

/// Runs `body` with spawn attributes that start a child with default signal handling and an
/// empty mask, whatever the test runner changed; `flags` adds to those two.
func withDefaultSignals<Result>(flags: Int32 = 0, _ body: (inout posix_spawnattr_t) -> Result) -> Result {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var defaults = sigset_t()
    sigfillset(&defaults)
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setflags(&attributes, Int16(Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) | flags))
    return body(&attributes)
}

/// A user keyring of its own, as another machine has: a process that holds a new user namespace
/// (`unshare -Ur`, the caller mapped to root in it), whose user keyring every command run
/// through `portalToken` shares and no other test sees. Stopped by its PID when released.
public final class PrivateUserKeyring: @unchecked Sendable {
    let holder: Process

    public init() throws {
        holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        holder.arguments = ["--user", "--map-root-user", "/bin/sleep", "3600"]
        try holder.run()
        // The namespace exists once the holder runs sleep in it.
        let deadline = ProcessRunner.monotonicSeconds() + 5
        while (try? String(contentsOfFile: "/proc/\(holder.processIdentifier)/comm", encoding: .utf8)) != "sleep\n",
            ProcessRunner.monotonicSeconds() < deadline
        {
            usleep(10_000)
        }
    }

    deinit {
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
    }

    /// Runs portal-token in the namespace, so with this keyring.
    public func portalToken(
        _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil, timeout: Double = 30
    ) throws -> ProcessResult {
        try ProcessRunner.run(
            "/usr/bin/nsenter",
            [
                "--target", "\(holder.processIdentifier)", "--user", "--preserve-credentials", "--",
                ProcessRunner.portalTokenPath,
            ] + arguments,
            stdin: stdin, environment: environment, timeout: timeout)
    }
}
