import Glibc

/// The one maker of listening TCP sockets, for this machine only: `127.0.0.1` (the proxy's
/// loopback mode, the sign-in's redirect listener) or `[::1]` (the redirect listener's
/// `localhost`). The socket is non-blocking, close-on-exec and sends without delay.
public enum LoopbackTCPListener {
    /// Binds and listens on `127.0.0.1:port`, or on `[::1]:port` alone when `ipv6`; 0 picks a
    /// free port. Returns the socket and the port it is bound to. A port another socket listens
    /// on is refused (EADDRINUSE); one an earlier run's connections hold in TIME_WAIT is not.
    public static func listen(port: UInt16, ipv6: Bool = false, backlog: Int32 = 512) throws(SystemCallError) -> (
        descriptor: Int32, port: UInt16
    ) {
        let name = ipv6 ? "[::1]:\(port)" : "127.0.0.1:\(port)"
        let descriptor = socket(
            ipv6 ? AF_INET6 : AF_INET,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw SystemCallError(path: name, errno: errno) }
        var yes: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, size)
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, size)
        var bound: UInt16?
        if ipv6 {
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &yes, size)
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6addr_loopback
            if bindAndListen(descriptor, &address, backlog: backlog) { bound = UInt16(bigEndian: address.sin6_port) }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
            if bindAndListen(descriptor, &address, backlog: backlog) { bound = UInt16(bigEndian: address.sin_port) }
        }
        guard let bound else {
            let number = errno
            _ = close(descriptor)
            throw SystemCallError(path: name, errno: number)
        }
        return (descriptor, bound)
    }

    /// Binds `descriptor` to `address`, listens, and reads back into `address` what was bound.
    private static func bindAndListen<Address>(_ descriptor: Int32, _ address: inout Address, backlog: Int32) -> Bool {
        var length = socklen_t(MemoryLayout<Address>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && Glibc.listen(descriptor, backlog) == 0
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
    }
}
