import Foundation
import Glibc

/// A child that runs while the test acts (as the browser, as the user at a keyboard): its
/// output goes to files the test can read at any time.
public final class RunningProcess: @unchecked Sendable {
    public let pid: pid_t
    public let directory: String
    private var exitCode: Int32?

    public init(_ executable: String, _ arguments: [String], environment: [String: String], stdin: String? = nil) throws
    {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-running-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var input = "/dev/null"
        if let stdin {
            input = directory + "/in"
            _ = FileManager.default.createFile(
                atPath: input, contents: Data(stdin.utf8), attributes: [.posixPermissions: 0o600])
        }
        pid = try ProcessRunner.spawn(
            executable, arguments, environment: environment, stdin: input,
            stdout: directory + "/out", stderr: directory + "/err")
    }

    deinit {
        if exitCode == nil {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var stdout: String { (try? String(contentsOfFile: directory + "/out", encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: directory + "/err", encoding: .utf8)) ?? "" }

    /// Waits until stderr holds `text`; throws at the timeout, or when the child ended first.
    @discardableResult
    public func waitForStderr(containing text: String, timeout: Double = 20) throws -> String {
        let deadline = ProcessRunner.monotonicSeconds() + timeout
        while true {
            let current = stderr
            if current.contains(text) { return current }
            if exitCode == nil, let code = ProcessRunner.wait(pid, timeout: 0) { exitCode = code }
            if exitCode != nil {
                throw ProcessTimeout(
                    command: "ended (\(exitCode!)) before stderr said '\(text)': \(current)", seconds: 0)
            }
            guard ProcessRunner.monotonicSeconds() < deadline else {
                throw ProcessTimeout(command: "stderr never said '\(text)': \(current)", seconds: timeout)
            }
            usleep(20_000)
        }
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the child to end and returns what it left.
    public func finish(timeout: Double = 30) throws -> ProcessResult {
        if exitCode == nil {
            guard let code = ProcessRunner.wait(pid, timeout: timeout) else {
                throw ProcessTimeout(command: "the child did not end; stderr: \(stderr)", seconds: timeout)
            }
            exitCode = code
        }
        return ProcessResult(exitCode: exitCode!, stdout: stdout, stderr: stderr, duration: 0)
    }
}

/// A child on a pseudo-terminal of its own, as a person at a terminal runs it: stdin, stdout and
/// stderr are the terminal, and it is the controlling terminal, so `/dev/tty` opens and Ctrl-C
/// (a 0x03 byte) signals the child's process group.
public final class TerminalProcess: @unchecked Sendable {
    public let pid: pid_t
    private let master: Int32
    private var output: [UInt8] = []
    private var exitCode: Int32?

    public init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        // posix_openpt, unlockpt and ptsname as Linux implements them (Swift's Glibc module
        // exports none of them): the multiplexer, then TIOCSPTLCK and TIOCGPTN.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw SpawnFailure(executable: "/dev/ptmx", code: errno) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        let setLock: UInt = 0x4004_5431, getNumber: UInt = 0x8004_5430
        guard ioctl(master, setLock, &unlock) == 0, ioctl(master, getNumber, &number) == 0 else {
            let error = errno
            close(master)
            throw SpawnFailure(executable: "/dev/ptmx", code: error)
        }
        let name = "/dev/pts/\(number)"
        var size = winsize(ws_row: 60, ws_col: 160, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Opened after setsid and without O_NOCTTY: the terminal becomes the controlling one.
        posix_spawn_file_actions_addopen(&actions, 0, name, O_RDWR, 0)
        posix_spawn_file_actions_adddup2(&actions, 0, 1)
        posix_spawn_file_actions_adddup2(&actions, 0, 2)
        // POSIX_SPAWN_SETSID (glibc 2.26+, 0x80): Swift's Glibc module does not export it.
        let setSession: Int32 = 0x80
        var environment = environment
        environment["TERM"] = "xterm-256color"
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let result = withDefaultSignals(flags: setSession) { attributes in
            posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        }
        guard result == 0 else {
            close(master)
            throw SpawnFailure(executable: executable, code: result)
        }
        pid = child
    }

    deinit {
        if exitCode == nil {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
        close(master)
    }

    /// Everything the terminal showed so far.
    public var text: String {
        drain()
        return String(decoding: output, as: UTF8.self)
    }

    private func drain() {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(master, &chunk, chunk.count)
            if count > 0 { output += chunk[0..<count]; continue }
            if count < 0 && errno == EINTR { continue }
            return
        }
    }

    /// Waits until the terminal has shown `text` at least `occurrences` times in all.
    @discardableResult
    public func waitFor(_ text: String, occurrences: Int = 1, timeout: Double = 20) throws -> String {
        let deadline = ProcessRunner.monotonicSeconds() + timeout
        while true {
            let current = self.text
            if current.components(separatedBy: text).count - 1 >= occurrences { return current }
            if exitCode == nil, let code = ProcessRunner.wait(pid, timeout: 0) { exitCode = code }
            if exitCode != nil {
                let last = self.text
                if last.components(separatedBy: text).count - 1 >= occurrences { return last }
                throw ProcessTimeout(
                    command: "ended (\(exitCode!)) before the terminal showed '\(text)': \(last)", seconds: 0)
            }
            guard ProcessRunner.monotonicSeconds() < deadline else {
                throw ProcessTimeout(command: "the terminal never showed '\(text)': \(current)", seconds: timeout)
            }
            usleep(20_000)
        }
    }

    /// Types `text` (a line ends with "\n"; "\u{03}" is Ctrl-C).
    public func type(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// Waits for the child to end, reading the terminal meanwhile so it never blocks on output.
    public func finish(timeout: Double = 30) throws -> Int32 {
        let deadline = ProcessRunner.monotonicSeconds() + timeout
        while exitCode == nil {
            drain()
            if let code = ProcessRunner.wait(pid, timeout: 0) { exitCode = code; break }
            guard ProcessRunner.monotonicSeconds() < deadline else {
                throw ProcessTimeout(command: "the terminal's child did not end: \(text)", seconds: timeout)
            }
            usleep(20_000)
        }
        drain()
        return exitCode!
    }
}
