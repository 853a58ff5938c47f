import Glibc
import PortalTokenCore

/// The cross-process lock around changes to a stored Portal session: an exclusive `flock` on a
/// lock file of its own in `$XDG_RUNTIME_DIR/portal-token` (a per-user tmpfs), or in
/// `$XDG_STATE_HOME/portal-token` where there is no runtime directory. Waiting is bounded: a lock
/// held past the bound is a storage failure (exit 4), never a hang. It is reentrant within the
/// process: a change made under the lock may call code that takes it again.
///
/// `sessions.lock` guards each change to a stored session. `sign-in.lock` is held around a
/// whole grant exchange or code check, request included, so the same redirect delivered twice
/// at once is exchanged once; it is always taken before `sessions.lock`, never inside it.
final class SessionFileLock: SessionLock {
    let path: String
    let timeoutMilliseconds: Int
    private var depth = 0

    init(context: Context, timeoutMilliseconds: Int, name: String = "sessions.lock") {
        let directory: String
        if let runtime = context.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), access(runtime, W_OK) == 0 {
            directory = runtime + "/portal-token"
        } else {
            directory = context.xdgDirectory("XDG_STATE_HOME", default: ".local/state") + "/portal-token"
        }
        path = directory + "/" + name
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        if depth > 0 {
            depth += 1
            defer { depth -= 1 }
            return try body()
        }
        let descriptor = try open()
        defer { close(descriptor) }
        var waited = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw StoreError(.failed, "cannot lock \(path): \(String(cString: strerror(errno)))")
            }
            guard waited < timeoutMilliseconds else {
                throw StoreError(.timedOut, "another portal-token process held \(path) for more than \(timeoutMilliseconds) ms",
                                 hint: "try again; if it persists, look for a stuck portal-token process")
            }
            usleep(5000)
            waited += 5
        }
        defer { flock(descriptor, LOCK_UN) }
        depth += 1
        defer { depth -= 1 }
        return try body()
    }

    private func open() throws -> Int32 {
        try makeDirectories(for: path)
        // O_NOFOLLOW: a symlink planted at the lock's name must not make portal-token create or
        // lock a file elsewhere; O_NONBLOCK: a FIFO there must not hang the open.
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        let hint = "remove it; portal-token creates the lock file itself"
        guard descriptor >= 0 else {
            if errno == ELOOP { throw StoreError(.failed, "the lock file \(path) is a symbolic link", hint: hint) }
            throw StoreError(.failed, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid() else {
            close(descriptor)
            throw StoreError(.failed, "the lock file \(path) is not a regular file of your own", hint: hint)
        }
        return descriptor
    }
}

/// Creates the directories above `path` that are missing, each 0700 from the start.
func makeDirectories(for path: String) throws {
    var prefix = ""
    let components = path.split(separator: "/").dropLast()
    for component in components {
        prefix += "/" + component
        if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
            throw StoreError(.failed, "cannot create \(prefix): \(String(cString: strerror(errno)))")
        }
    }
}
