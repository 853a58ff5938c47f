import Glibc
import HookRunner
import PortalTokenCore

/// Starts programs with posix_spawn: every child gets portal-token's environment (the passphrase
/// variable was already removed from it), a process group of its own and default signals.
struct ProcessLauncher: ProgramLauncher {
    /// Runs a helper program (git) found on PATH and collects its standard output, within a bound:
    /// stdin is /dev/null, stderr is portal-token's own (git's own message reaches the user).
    func run(_ program: String, _ arguments: [String], timeoutMilliseconds: Int) -> ProgramResult {
        typealias Result = ProgramResult
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return Result(status: nil, output: "", startError: errno) }
        // Neither end reaches another child; the spawn's dup2 gives git its copy.
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        defer { close(pipeEnds[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let started = withChildSpawnAttributes { attributes in
            posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        }
        close(pipeEnds[1])
        guard started == 0 else { return Result(status: nil, output: "", startError: started) }

        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var waited = 0
        var readable = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
        while waited < timeoutMilliseconds {
            let ready = poll(&readable, 1, 50)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { waited += 50; continue }
            let count = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += chunk[0..<count]
        }
        var status: Int32 = 0
        if waited >= timeoutMilliseconds {
            kill(-pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return Result(status: nil, output: "", startError: ETIMEDOUT)
        }
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Result(status: code, output: String(decoding: output, as: UTF8.self))
    }

    /// Runs `program arguments…` found on PATH with /dev/null for its streams and gives it up to
    /// `waitMilliseconds` to finish. True when it finished with 0, or is still running (a browser
    /// that keeps xdg-open waiting); false when it could not start or failed.
    func start(_ program: String, _ arguments: [String], waitMilliseconds: Int) -> Bool {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in Int32(0)...2 {
            posix_spawn_file_actions_addopen(
                &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let started = withChildSpawnAttributes { attributes in
            posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        }
        guard started == 0 else { return false }
        var status: Int32 = 0
        var waited = 0
        while waited < waitMilliseconds {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return status & 0x7f == 0 && (status >> 8) & 0xff == 0 }
            if reaped < 0 && errno != EINTR { return false }
            usleep(10_000)
            waited += 10
        }
        return true
    }
}
