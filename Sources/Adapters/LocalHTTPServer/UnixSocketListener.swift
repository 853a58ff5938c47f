import Basics
import Glibc

/// Listening Unix sockets for `LocalHTTPServer`: one bound at a path in a private directory, or
/// those systemd passed (socket activation). docs/agent.md, "The sockets", states the rules.
public enum UnixSocketListener {
    public enum Failure: Error, Equatable {
        /// The directory that holds the socket belongs to another user, or others may write to it.
        case unsafeDirectory(path: String, reason: String)
        /// Something that is not a socket of ours sits at the path.
        case foreignFile(path: String)
        /// A live server already answers on the socket.
        case inUse(path: String)
        /// A system call failed.
        case system(SystemCallError)

        public var message: String {
            switch self {
            case .unsafeDirectory(let path, let reason): return "the socket directory \(path) is unsafe: \(reason)"
            case .foreignFile(let path): return "\(path) exists and is not a socket of this user"
            case .inUse(let path): return "another server already listens on \(path)"
            case .system(let error): return "cannot listen on \(error.path): \(error.reason)"
            }
        }
    }

    /// The longest path a `sockaddr_un` holds, its terminating NUL excluded.
    public static let maximumPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Binds and listens on `path`, socket mode 0600. Its directory is created 0700 when missing
    /// and must be the user's own and writable by no one else. A socket already at the path is
    /// replaced only when it is the user's own and nothing answers on it (a stale one).
    public static func listen(at path: String, backlog: Int32 = 512) throws(Failure) -> Int32 {
        guard path.utf8.count <= maximumPathBytes, path.hasPrefix("/") else {
            throw .system(SystemCallError(path: path, errno: ENAMETOOLONG))
        }
        let directory = String(path[..<path.lastIndex(of: "/")!])
        do {
            try Directories.create(directory.isEmpty ? "/" : directory)
        } catch {
            throw .system(error)
        }
        do {
            try PrivateDirectory.check(directory.isEmpty ? "/" : directory)
        } catch {
            switch error {
            case .foreignOwner(let uid):
                throw .unsafeDirectory(path: directory, reason: "it belongs to uid \(uid)")
            case .writableByOthers(let mode):
                throw .unsafeDirectory(
                    path: directory, reason: "others may write to it (mode \(String(mode, radix: 8)))")
            case .cannotExamine(let number):
                throw .system(SystemCallError(path: directory, errno: number))
            }
        }

        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK, status.st_uid == geteuid() else {
                throw .foreignFile(path: path)
            }
            if answers(path) { throw .inUse(path: path) }
            guard unlink(path) == 0 || errno == ENOENT else {
                throw .system(SystemCallError(path: path, errno: errno))
            }
        }

        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system(SystemCallError(path: path, errno: errno)) }
        var address = socketAddress(path)
        // The socket file is made 0600 before anyone may connect. Until then it sits in the
        // 0700 directory checked above, which no one else can enter; the umask, which would
        // set the mode at bind, is the whole process's and is left alone.
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(descriptor, backlog) == 0 else {
            let number = errno
            _ = close(descriptor)
            throw .system(SystemCallError(path: path, errno: number))
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return descriptor
    }

    /// Whether a server accepts a connection on the socket at `path` (within 200 ms).
    static func answers(_ path: String) -> Bool {
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { _ = close(descriptor) }
        var address = socketAddress(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result == 0 { return true }
        guard errno == EAGAIN || errno == EINPROGRESS else { return false }
        var writable = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
        guard poll(&writable, 1, 200) == 1 else { return true }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
        return error == 0
    }

    /// A `sockaddr_un` naming `path`, which the caller checked fits.
    public static func socketAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(maximumPathBytes))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// The listening sockets systemd passed this process (the sd_listen_fds(3) protocol: they
    /// start at descriptor 3, `LISTEN_FDS` counts them, `LISTEN_PID` must be this process), each
    /// with its name from `LISTEN_FDNAMES` when given. Empty when this process was not
    /// socket-activated. The variables are removed, so children do not inherit them.
    public static func activated() -> [(descriptor: Int32, name: String?)] {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }), let pid = Int32(pidText),
            pid == getpid(), let countText = getenv("LISTEN_FDS").map({ String(cString: $0) }),
            let count = Int32(countText), count > 0, count < 64
        else { return [] }
        let names = getenv("LISTEN_FDNAMES").map { String(cString: $0).split(separator: ":").map(String.init) } ?? []
        return (0..<count).map { offset in
            let descriptor = 3 + offset
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            return (descriptor, Int(offset) < names.count ? names[Int(offset)] : nil)
        }
    }

    /// The path a listening Unix socket is bound to, nil for another kind of socket.
    public static func boundPath(of descriptor: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }
}
