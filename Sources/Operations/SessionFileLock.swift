import Basics
import Glibc
import PortalTokenCore

/// The cross-process lock around changes to a stored Portal session: an exclusive `flock` on a
/// lock file of its own in `$XDG_RUNTIME_DIR/portal-token` (a per-user tmpfs), or in
/// `$XDG_STATE_HOME/portal-token` where there is no runtime directory. Waiting is bounded: a lock
/// held past the bound is a storage failure (exit 4), never a hang. It is reentrant within the
/// process: a change made under the lock may call code that takes it again.
///
/// `sessions.lock` guards each change to the keyring or Vault store and to a session stored
/// there (the encrypted file's store lock is its own `<file>.lock`, `StoreFileLock`).
/// `sign-in.lock` is held around a whole grant exchange or code check, request included, so the
/// same redirect delivered twice at once is exchanged once; it is always taken before the store
/// lock, never inside it.
///
/// The lock is only as good as its directory: another user who may rename the lock file (or the
/// directory) away while it is held lets a second process take a lock of its own, and the hook
/// runs twice. So the directory must be the user's own and writable by no one else, as the store
/// directory must (`PrivateDirectory`), and the runtime directory holding it must let no one else
/// rename it (docs/storage.md, "The store lock").
package final class SessionFileLock: SessionLock {
    package let path: String
    package let directory: String
    /// `XDG_RUNTIME_DIR` when the lock is kept there.
    package let runtimeDirectory: String?
    package let timeoutMilliseconds: Int
    private var depth = 0

    package init(context: Context, timeoutMilliseconds: Int, name: String = "sessions.lock") {
        if let runtime = context.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), access(runtime, W_OK) == 0 {
            runtimeDirectory = runtime
            directory = runtime + "/portal-token"
        } else {
            runtimeDirectory = nil
            directory = context.xdgDirectory("XDG_STATE_HOME", default: ".local/state") + "/portal-token"
        }
        path = directory + "/" + name
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    package func withLock<Result>(_ body: () throws -> Result) throws -> Result {
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
        try checkDirectories()
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

    /// Refuses a lock directory (or a runtime directory holding it) that another user could
    /// rename things in; creates the lock directory 0700 when it is missing.
    private func checkDirectories() throws(StoreError) {
        if let runtimeDirectory {
            do {
                try PrivateDirectory.checkParent(runtimeDirectory)
            } catch {
                let hint = "set XDG_RUNTIME_DIR to a directory of your own (systemd makes /run/user/\(geteuid()))"
                throw StoreError(
                    error, "the runtime directory \(runtimeDirectory) (XDG_RUNTIME_DIR)", ownerHint: hint,
                    modeHint: hint)
            }
        }
        do {
            try Directories.createParent(of: path)
        } catch {
            throw StoreError(.failed, "cannot create \(error.path): \(error.reason)")
        }
        do {
            try PrivateDirectory.check(directory)
        } catch {
            throw StoreError(
                error, "the lock directory \(directory)",
                ownerHint: "remove it (portal-token creates it itself, mode 700), or set XDG_RUNTIME_DIR to a "
                    + "directory of your own",
                modeHint: "restrict it with 'chmod go-w \(directory)'")
        }
    }
}
