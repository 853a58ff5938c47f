import Glibc
import Basics
import Operations
import PortalTokenCore

/// Starts programs through `ChildProcess`: every child gets portal-token's environment (the
/// passphrase variable was already removed from it), a process group of its own and default signals.
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
        let started = ChildProcess.spawn(
            program, arguments, searchPath: true, streams: [0: .null, 1: .descriptor(pipeEnds[1])],
            ownProcessGroup: true)
        close(pipeEnds[1])
        let pid: pid_t
        switch started {
        case .success(let child): pid = child
        case .failure(let failure): return Result(status: nil, output: "", startError: failure.number)
        }

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
        guard
            case .success(let pid) = ChildProcess.spawn(
                program, arguments, searchPath: true, streams: [0: .null, 1: .null, 2: .null], ownProcessGroup: true)
        else { return false }
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
