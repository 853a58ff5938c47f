import Basics
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
        let held = try acquire()
        defer { held.release() }
        depth += 1
        defer { depth -= 1 }
        return try body()
    }

    private func acquire() throws -> FileLock {
        do {
            try Directories.createParent(of: path)
        } catch {
            throw StoreError(.failed, "cannot create \(error.path): \(error.reason)")
        }
        do {
            return try FileLock.acquire(path, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            throw StoreError(
                error, lockPath: path,
                timedOut: StoreError(
                    .timedOut, "another portal-token process held \(path) for more than \(timeoutMilliseconds) ms",
                    hint: "try again; if it persists, look for a stuck portal-token process"))
        }
    }
}
