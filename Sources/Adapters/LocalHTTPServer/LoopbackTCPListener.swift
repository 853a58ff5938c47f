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

extension LocalHTTPServer {
    /// Runs `run` on a detached thread of its own, then `finished`; false when the system
    /// refused a thread.
    public func runInBackground(finished: @escaping @Sendable () -> Void) -> Bool {
        DetachedThread.start(stackBytes: options.threadStackBytes) { [self] in
            try? run()
            finished()
        }
    }
}
