import Basics
import Commands
import Glibc
import KernelKeyring
import LocalHTTPServer
import PeerCredentials
import Operations
import PortalTokenCore

/// The agent's sockets, server and signals (docs/agent.md, "The sockets"): the glue between the
/// HTTP server, the kernel's word on each caller, and the agent's router in Commands.
enum AgentServing {
    /// Serves until SIGTERM, SIGINT or SIGHUP, or the idle exit.
    static func serve(_ options: AgentServeOptions, _ handle: @escaping AgentHandler) throws {
        // A client that goes away mid-answer is a failed write, not the end of the agent.
        signal(SIGPIPE, SIG_IGN)
        var listeners: [(descriptor: Int32, socket: AgentRules.Socket)] = []
        var boundPaths: [String] = []
        let activated = UnixSocketListener.activated()
        if activated.isEmpty {
            guard let main = options.mainSocketPath, let restricted = options.restrictedSocketPath else {
                throw CLIError.usage(
                    "XDG_RUNTIME_DIR is not set, so the agent's sockets have no place",
                    hint: "run it in a login session, or give --socket PATH and --restricted-socket PATH")
            }
            for (path, socket) in [(main, AgentRules.Socket.main), (restricted, .restricted)] {
                do {
                    listeners.append((try UnixSocketListener.listen(at: path), socket))
                    boundPaths.append(path)
                } catch {
                    for listener in listeners { _ = close(listener.descriptor) }
                    for path in boundPaths { unlink(path) }
                    throw CLIError(
                        "the agent cannot listen: \(error.message)",
                        hint: hint(for: error), exitCode: .storage)
                }
            }
        } else {
            // systemd passed the sockets of portal-token-agent.socket; the restricted one is told
            // apart by its name.
            for (descriptor, name) in activated {
                let path = UnixSocketListener.boundPath(of: descriptor) ?? ""
                let restricted = name == "restricted" || path.hasSuffix("/agent-restricted.sock")
                listeners.append((descriptor, restricted ? .restricted : .main))
            }
        }
        defer {
            for listener in listeners { _ = close(listener.descriptor) }
            for path in boundPaths { unlink(path) }
        }

        let sockets = listeners.map(\.socket)
        let server = try LocalHTTPServer<(ConnectedPeer, AgentRules.Socket)>(
            listeners: listeners.map(\.descriptor),
            options: .init(idleExitMilliseconds: options.idleExitMilliseconds),
            accept: { descriptor, index in
                PeerCredentials.identify(descriptor).map { ($0, sockets[index]) }
            },
            // The caller as it is when the request arrives: still the process that connected.
            stream: { request, exchange, peer in handle(request, exchange, peer.0.current(), peer.1) })
        let log = options.log
        // Signals are taken by one thread, so every other thread (each connection's) runs with
        // them blocked and the server stops cleanly.
        StopSignals.take { number in
            log("portal-token agent: stopping (signal \(number))")
            server.stop()
        }
        let names = listeners.map { listener in
            let path = UnixSocketListener.boundPath(of: listener.descriptor) ?? "fd \(listener.descriptor)"
            return "\(path) (\(listener.socket.rawValue))"
        }
        log(
            "portal-token agent: listening on \(names.joined(separator: " and "))"
                + (activated.isEmpty ? "" : ", from systemd"))
        try server.run()
    }

    private static func hint(for failure: UnixSocketListener.Failure) -> String? {
        switch failure {
        case .unsafeDirectory(let path, _):
            return "make \(path) your own and private: chmod 700 \(path)"
        case .inUse:
            return "an agent already runs: use it, or stop it first"
        case .foreignFile(let path):
            return "move \(path) out of the way"
        case .system:
            return nil
        }
    }

    /// The secret cache every request inside the agent uses: the kernel keyring when this
    /// process may use it, else the agent's own memory, for the same timeouts.
    nonisolated(unsafe) static let secretCache: any SecretCache = {
        let keyring = KernelKeyring()
        let probe = SecretCacheNames.prefix + "agent-probe"
        keyring.store(Secret("probe"), as: probe, forSeconds: 5)
        let works = keyring.read(probe) == Secret("probe")
        keyring.drop(probe)
        return works ? keyring : MemorySecretCache()
    }()
}
