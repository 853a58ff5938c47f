import Basics
import Glibc
import PortalTokenCore

/// Runs the user's `on-session-invalidated` hook (docs/sessions.md, "The hook"):
/// - its environment is built from nothing: the variables the caller passes plus `PATH`, `HOME`,
///   `LANG`, `LC_*` and the display variables copied from portal-token's own environment, so
///   no token, passphrase or other setting can reach it;
/// - no arguments; stdin is `/dev/null`; its stdout and stderr both go, through a pipe that
///   portal-token copies, to portal-token's stderr, because git owns portal-token's stdout;
/// - it runs in a process group of its own, and at the timeout the whole group gets SIGTERM,
///   then SIGKILL after a grace period, so a hook's own children cannot outlive the bound;
/// - its output is copied until the pipe closes, but never past the bound, and for at most
///   `outputDrainMilliseconds` after the hook exits: a descendant that left the group (setsid)
///   and keeps the pipe open holds neither portal-token nor, through portal-token's stderr, git;
/// - a path where nothing exists, or where the file is not executable, is reported as such.
///
/// The wait polls `waitpid(WNOHANG)` against the monotonic clock and also counts the time it
/// has slept, so the bound holds even under a clock-faking `LD_PRELOAD`; Dispatch timers are
/// not used because Debian's faketime stops them from ever firing.
public struct HookRunner: HookLauncher {
    public static let defaultTimeoutMilliseconds = 30_000
    public static let defaultTerminationGraceMilliseconds = 2_000
    /// How long output is still copied once the hook itself has exited.
    public static let outputDrainMilliseconds = 500

    /// Inherited by name; every variable starting with `LC_` is inherited too.
    public static let inheritedVariableNames: [String] = [
        "PATH", "HOME", "LANG", "DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR",
    ]
    /// What `PATH` is when portal-token itself has none.
    public static let fallbackPath = "/usr/local/bin:/usr/bin:/bin"

    public let timeoutMilliseconds: Int
    public let terminationGraceMilliseconds: Int
    /// Where the hook's stdout and stderr go; portal-token's stderr except in tests.
    public let outputDescriptor: Int32
    /// The environment inherited variables are copied from; portal-token's own unless injected.
    public let parentEnvironment: [String: String]

    public init(
        timeoutMilliseconds: Int = defaultTimeoutMilliseconds,
        terminationGraceMilliseconds: Int = defaultTerminationGraceMilliseconds,
        outputDescriptor: Int32 = STDERR_FILENO,
        parentEnvironment: [String: String]? = nil
    ) {
        self.timeoutMilliseconds = timeoutMilliseconds
        self.terminationGraceMilliseconds = terminationGraceMilliseconds
        self.outputDescriptor = outputDescriptor
        self.parentEnvironment = parentEnvironment ?? ProcessEnvironment.current()
    }

    /// The hook's whole environment: `variables`, then the inherited names from `parent`.
    /// Names that cannot be environment variables (empty, or holding `=` or NUL) are dropped.
    public static func environment(variables: [String: String], parent: [String: String]) -> [String: String] {
        var environment: [String: String] = [:]
        for (name, value) in parent where inheritedVariableNames.contains(name) || name.hasPrefix("LC_") {
            environment[name] = value
        }
        if environment["PATH"] == nil { environment["PATH"] = fallbackPath }
        for (name, value) in variables { environment[name] = value }
        return environment.filter { name, value in
            !name.isEmpty && !name.utf8.contains(UInt8(ascii: "=")) && !name.utf8.contains(0) && !value.utf8.contains(0)
        }
    }

    public func run(executable: String, variables: [String: String]) -> HookOutcome {
        var information = stat()
        if stat(executable, &information) != 0 {
            return errno == ENOENT || errno == ENOTDIR ? .missing : .couldNotStart(errorNumber: errno)
        }
        if information.st_mode & S_IFMT != S_IFREG || access(executable, X_OK) != 0 { return .notExecutable }
        // A hook another user owns or may write would run their code.
        if let refusal = HookOutcome.untrusted(owner: information.st_uid, mode: information.st_mode, user: geteuid()) {
            return refusal
        }
        let environment = Self.environment(variables: variables, parent: parentEnvironment)
        var ends: [Int32] = [-1, -1]
        // pipe2 is a GNU extension Swift's Glibc module does not export.
        guard pipe(&ends) == 0 else { return .couldNotStart(errorNumber: errno) }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let output = OutputCopy(descriptor: ends[0], destination: outputDescriptor)
        defer { output.close() }
        let pid: pid_t
        let spawned = spawn(executable, environment: environment, output: ends[1])
        Glibc.close(ends[1])
        switch spawned {
        case .success(let child): pid = child
        case .failure(let error): return .couldNotStart(errorNumber: error.number)
        }
        let started = Int(MonotonicClock.nanoseconds())
        if let status = waitForExit(of: pid, withinMilliseconds: timeoutMilliseconds, copying: output) {
            let used = (Int(MonotonicClock.nanoseconds()) - started) / 1_000_000
            output.drain(forMilliseconds: min(Self.outputDrainMilliseconds, max(0, timeoutMilliseconds - used)))
            return outcome(of: status)
        }
        // Past the bound: ask the whole group to stop, then make it.
        kill(-pid, SIGTERM)
        _ = waitForExit(of: pid, withinMilliseconds: terminationGraceMilliseconds, copying: output)
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return .timedOut(milliseconds: timeoutMilliseconds)
    }

    /// Copies what the hook writes to the pipe on to `destination`.
    final class OutputCopy {
        private(set) var descriptor: Int32
        let destination: Int32
        private var open = true

        init(descriptor: Int32, destination: Int32) {
            self.descriptor = descriptor
            self.destination = destination
        }

        /// Copies whatever is ready now; false once the pipe is closed at the far end.
        @discardableResult
        func copyReady() -> Bool {
            guard open else { return false }
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 0) > 0 else { return true }
                let count = read(descriptor, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { open = false; return false }
                var offset = 0
                while offset < count {
                    let written = chunk[offset..<count].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
        }

        /// Copies until the pipe closes or `milliseconds` pass.
        func drain(forMilliseconds milliseconds: Int) {
            let end = Int(MonotonicClock.nanoseconds()) + milliseconds * 1_000_000
            while copyReady() {
                let left = (end - Int(MonotonicClock.nanoseconds())) / 1_000_000
                guard left > 0 else { return }
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&ready, 1, Int32(min(left, 50)))
            }
        }

        func close() {
            if descriptor >= 0 { Glibc.close(descriptor) }
            descriptor = -1
            open = false
        }
    }

    // MARK: Spawning

    private func spawn(_ executable: String, environment: [String: String], output: Int32)
        -> Result<pid_t, ChildProcess.Failure>
    {
        // Nothing portal-token holds open (a store's lock, a socket) reaches the hook.
        ChildProcess.spawn(
            executable, [], searchPath: false, environment: environment,
            streams: [0: .null, 1: .descriptor(output), 2: .descriptor(output)], ownProcessGroup: true,
            closesInherited: true)
    }

    // MARK: Waiting

    /// The wait status once the child exits, or nil when `milliseconds` pass first. Time
    /// passed is the larger of the monotonic clock's reading and the sleeps that ran their full
    /// length, so neither a frozen clock nor an interrupted sleep ends the wait early.
    private func waitForExit(of pid: pid_t, withinMilliseconds milliseconds: Int, copying output: OutputCopy) -> Int32?
    {
        let start = Int(MonotonicClock.nanoseconds())
        var slept = 0
        var interval = 1
        while true {
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return status }
            if result < 0 && errno != EINTR {
                // Only when SIGCHLD is ignored and the kernel reaped the child itself.
                return Int32.min
            }
            let elapsed = max((Int(MonotonicClock.nanoseconds()) - start) / 1_000_000, slept)
            if elapsed >= milliseconds { return nil }
            let pause = min(interval, milliseconds - elapsed)
            // Sleeps on the pipe: output is copied as it comes, and the pause still counts
            // when nothing came (a closed pipe is polled no more).
            var ready = pollfd(fd: output.descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&ready, output.copyReady() ? 1 : 0, Int32(pause)) == 0 { slept += pause }
            interval = min(interval * 2, 25)
        }
    }

    private func outcome(of status: Int32) -> HookOutcome {
        if status == Int32.min { return .statusUnavailable }
        // The <sys/wait.h> macros are not imported into Swift; these are their definitions.
        let signal = status & 0x7f
        if signal == 0 { return .exited(status: (status >> 8) & 0xff) }
        return .signalled(signal: signal)
    }

}
