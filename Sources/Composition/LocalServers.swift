import Basics
import Commands
import Glibc
import LocalHTTPServer
import PeerCredentials
import Operations
import PortalTokenCore
import Synchronization

/// The streaming local server behind `Services.bindLocalServer`: `LocalHTTPServer` on a
/// loopback TCP socket or a Unix socket. On a Unix socket each caller is
/// named by the kernel (`PeerCredentials.identify`), as the agent's are, and its requests are
/// judged by the handler; a caller the kernel cannot name is closed unanswered.
final class StreamingLocalServer: LocalStreamingServer, @unchecked Sendable {
    let port: UInt16?
    private let descriptor: Int32
    private let isUnixSocket: Bool
    private let server = Mutex<LocalHTTPServer<ConnectedPeer?>?>(nil)
    /// Whether a background `run` has not returned yet.
    private let running = Mutex(false)

    /// The Unix socket's path, and the file it was bound as: removed when `run` ends, unless
    /// another file took the name meanwhile.
    private let socketFile: (path: String, device: UInt, inode: UInt)?

    private init(descriptor: Int32, port: UInt16?, socketPath: String? = nil) {
        self.descriptor = descriptor
        self.port = port
        self.isUnixSocket = port == nil
        var status = stat()
        socketFile = socketPath.flatMap {
            lstat($0, &status) == 0 ? ($0, UInt(status.st_dev), UInt(status.st_ino)) : nil
        }
    }

    static func bind(_ address: LocalListenAddress) throws(CLIError) -> StreamingLocalServer {
        switch address {
        case .loopback(let port):
            do {
                let (descriptor, bound) = try LoopbackTCPListener.listen(port: port)
                return StreamingLocalServer(descriptor: descriptor, port: bound)
            } catch {
                throw CLIError(
                    "cannot listen on 127.0.0.1:\(port): \(error.reason)", hint: "choose another port, or 0 for any",
                    exitCode: .usage)
            }
        case .unixSocket(let path):
            do {
                let descriptor = try UnixSocketListener.listen(at: path)
                return StreamingLocalServer(descriptor: descriptor, port: nil, socketPath: path)
            } catch {
                throw CLIError(error.message, exitCode: .usage)
            }
        }
    }

    private func make(_ handler: @escaping LocalStreamHandler) throws -> LocalHTTPServer<ConnectedPeer?> {
        let isUnixSocket = self.isUnixSocket
        let made = try LocalHTTPServer<ConnectedPeer?>(
            listeners: [descriptor],
            accept: { connection, _ in
                guard isUnixSocket else { return .some(nil) }
                return PeerCredentials.identify(connection).map { .some($0) }
            },
            // The caller as it is when the request arrives: still the process that connected.
            stream: { request, exchange, peer in handler(request, exchange, peer?.current()) })
        server.withLock { $0 = made }
        return made
    }

    func start(_ handler: @escaping LocalStreamHandler) throws {
        running.withLock { $0 = true }
        guard try make(handler).runInBackground(finished: { [self] in running.withLock { $0 = false } }) else {
            running.withLock { $0 = false }
            throw CLIError("cannot start the server's thread", exitCode: .usage)
        }
    }

    /// Serves in the foreground. On a Unix socket, SIGTERM, SIGINT or SIGHUP stop the server as
    /// they stop the agent, and the socket is removed (`proxy --socket`); on a port the signals
    /// keep their defaults.
    func run(_ handler: @escaping LocalStreamHandler) throws {
        let made = try make(handler)
        guard let socketFile else { return try made.run() }
        StopSignals.take { _ in made.stop() }
        defer {
            var status = stat()
            if lstat(socketFile.path, &status) == 0, UInt(status.st_dev) == socketFile.device,
                UInt(status.st_ino) == socketFile.inode
            {
                unlink(socketFile.path)
            }
        }
        try made.run()
    }

    /// Stops, and waits for the requests in progress to end (a 401's hook included, which is
    /// bounded), so a process that exits next leaves nothing half done.
    func stop() {
        server.withLock { $0 }?.stop()
        let deadline = MonotonicClock.milliseconds() + Self.stopWaitMilliseconds
        while running.withLock({ $0 }), MonotonicClock.milliseconds() < deadline { usleep(5000) }
    }

    /// Longer than the hook's own bound.
    static let stopWaitMilliseconds: Int64 = 40_000
}

/// SIGTERM, SIGINT and SIGHUP as a server's stop: blocked in every thread (so no connection's
/// thread takes one), and waited for by one thread that calls `stop` when the first arrives.
/// Called before the server's threads start, as they inherit the mask.
enum StopSignals {
    static func take(_ stop: @escaping (Int32) -> Void) {
        var signals = sigset_t()
        sigemptyset(&signals)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, number) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let waited = signals
        DetachedThread.start {
            var number: Int32 = 0
            var set = waited
            sigwait(&set, &number)
            stop(number)
        }
    }
}
