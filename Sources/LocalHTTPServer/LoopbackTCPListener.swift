import Basics
import Glibc

/// A listening TCP socket on 127.0.0.1 for `LocalHTTPServer` (the proxy's loopback mode), and the
/// kernel's word on who is at the other end of a Unix socket.
public enum LoopbackTCPListener {
    /// Binds and listens on `127.0.0.1:port` (0 picks a free port); returns the socket and the
    /// port it is bound to. Never any other address: the socket is for this machine only.
    public static func listen(port: UInt16, backlog: Int32 = 512) throws(SystemCallError) -> (
        descriptor: Int32, port: UInt16
    ) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemCallError(path: "127.0.0.1:\(port)", errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, backlog) == 0 else {
            let number = errno
            _ = close(descriptor)
            throw SystemCallError(path: "127.0.0.1:\(port)", errno: number)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var noDelay: Int32 = 1
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }
}

/// Who is at the other end of a connected Unix socket, as the kernel recorded it when the peer
/// connected (`SO_PEERCRED`): never what the peer says of itself.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    /// nil when the socket is not a Unix socket or the kernel would not say.
    public static func of(_ descriptor: Int32) -> PeerCredentials? {
        // Other sockets answer too, with a made-up peer (pid 0, uid and gid -1).
        var domain: Int32 = 0
        var domainLength = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_DOMAIN, &domain, &domainLength) == 0, domain == AF_UNIX else {
            return nil
        }
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }, which Glibc exports only under _GNU_SOURCE.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        let size = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        var length = size
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == size else {
            return nil
        }
        guard credentials.1 != UInt32.max, credentials.2 != UInt32.max else { return nil }
        return PeerCredentials(pid: credentials.0, uid: credentials.1, gid: credentials.2)
    }
}

extension LocalHTTPServer {
    /// Runs `run` on a detached thread of its own, then `finished`; false when the system
    /// refused a thread.
    public func runInBackground(finished: @escaping @Sendable () -> Void) -> Bool {
        ConnectionThread.start(stackBytes: options.threadStackBytes) { [self] in
            try? run()
            finished()
        }
    }
}
