import Glibc
import PortalTokenCore

/// Runs the user's `on-session-invalidated` hook (product contract §5):
/// - its environment is built from nothing: the variables the caller passes plus `PATH`, `HOME`,
///   `LANG`, `LC_*` and the display variables copied from portal-token's own environment, so
///   no token, passphrase or other setting can reach it;
/// - no arguments; stdin is `/dev/null`; its stdout and stderr both go to portal-token's stderr,
///   because git owns portal-token's stdout;
/// - it runs in a process group of its own, and at the timeout the whole group gets SIGTERM,
///   then SIGKILL after a grace period, so a hook's own children cannot outlive the bound.
///
/// The wait polls `waitpid(WNOHANG)` against the monotonic clock and also counts the time it
/// has slept, so the bound holds even under a clock-faking `LD_PRELOAD`; Dispatch timers are
/// not used because Debian's faketime stops them from ever firing.
public struct HookRunner: HookLauncher {
    public static let defaultTimeoutMilliseconds = 30_000
    public static let defaultTerminationGraceMilliseconds = 2_000

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

    public init(timeoutMilliseconds: Int = defaultTimeoutMilliseconds,
                terminationGraceMilliseconds: Int = defaultTerminationGraceMilliseconds,
                outputDescriptor: Int32 = STDERR_FILENO,
                parentEnvironment: [String: String]? = nil) {
        self.timeoutMilliseconds = timeoutMilliseconds
        self.terminationGraceMilliseconds = terminationGraceMilliseconds
        self.outputDescriptor = outputDescriptor
        self.parentEnvironment = parentEnvironment ?? Self.processEnvironment()
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
        let environment = Self.environment(variables: variables, parent: parentEnvironment)
        let pid: pid_t
        switch spawn(executable, environment: environment) {
        case .success(let child): pid = child
        case .failure(let error): return .couldNotStart(errorNumber: error.number)
        }
        if let status = waitForExit(of: pid, withinMilliseconds: timeoutMilliseconds) {
            return outcome(of: status)
        }
        // Past the bound: ask the whole group to stop, then make it.
        kill(-pid, SIGTERM)
        _ = waitForExit(of: pid, withinMilliseconds: terminationGraceMilliseconds)
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return .timedOut(milliseconds: timeoutMilliseconds)
    }

    // MARK: Spawning

    private struct SpawnError: Error { let number: Int32 }

    private func spawn(_ executable: String, environment: [String: String]) -> Result<pid_t, SpawnError> {
        var fileActions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fileActions)
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        posix_spawn_file_actions_addopen(&fileActions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&fileActions, outputDescriptor, STDOUT_FILENO)
        if outputDescriptor != STDERR_FILENO {
            posix_spawn_file_actions_adddup2(&fileActions, outputDescriptor, STDERR_FILENO)
        }
        // Nothing portal-token holds open (a store's lock, a socket) reaches the hook.
        closeInheritedDescriptors(&fileActions)

        var cStrings: [UnsafeMutablePointer<CChar>?] = []
        defer { for string in cStrings { free(string) } }
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), nil]
        cStrings.append(argv[0])
        var envp: [UnsafeMutablePointer<CChar>?] = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") }
        cStrings.append(contentsOf: envp)
        envp.append(nil)
        guard !cStrings.contains(where: { $0 == nil }) else { return .failure(SpawnError(number: ENOMEM)) }

        var pid: pid_t = 0
        let result = withChildSpawnAttributes { attributes in
            posix_spawn(&pid, executable, &fileActions, &attributes, argv, envp)
        }
        guard result == 0 else { return .failure(SpawnError(number: result)) }
        return .success(pid)
    }

    /// Adds "close every descriptor from 3 up" to the spawn: glibc's
    /// `posix_spawn_file_actions_addclosefrom_np` (2.34 and later) when present, which Swift's
    /// Glibc module does not declare, so it is found by name; else one close per descriptor
    /// listed in /proc/self/fd (glibc ignores a close of a descriptor that is gone by then).
    private func closeInheritedDescriptors(_ fileActions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        if let process = dlopen(nil, RTLD_NOW) {
            defer { dlclose(process) }
            if let symbol = dlsym(process, "posix_spawn_file_actions_addclosefrom_np") {
                let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
                if addCloseFrom(&fileActions, 3) == 0 { return }
            }
        }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let descriptor = Int32(name), descriptor > 2, descriptor != own {
                posix_spawn_file_actions_addclose(&fileActions, descriptor)
            }
        }
    }

    // MARK: Waiting

    /// The wait status once the child exits, or nil when `milliseconds` pass first. Time
    /// passed is the larger of the monotonic clock's reading and the sleeps that ran their full
    /// length, so neither a frozen clock nor an interrupted sleep ends the wait early.
    private func waitForExit(of pid: pid_t, withinMilliseconds milliseconds: Int) -> Int32? {
        let start = Self.monotonicNanoseconds()
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
            let elapsed = max((Self.monotonicNanoseconds() - start) / 1_000_000, slept)
            if elapsed >= milliseconds { return nil }
            let pause = min(interval, milliseconds - elapsed)
            if poll(nil, 0, Int32(pause)) == 0 { slept += pause }
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

    private static func monotonicNanoseconds() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time.tv_sec * 1_000_000_000 + time.tv_nsec
    }

    private static func processEnvironment() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return result
    }
}
