import Glibc

/// An exclusive `flock` on a lock file of its own, shared by cooperating processes. Waiting is
/// bounded by a deadline on the monotonic clock, retried with a growing, jittered back-off as
/// git's lockfile.c does, so a lock held too long is an error, never a hang. Released when the
/// value is (closing the file releases the flock).
///
/// The lock file is opened with O_NOFOLLOW (a symlink planted at its name must not make the
/// caller create or lock a file elsewhere) and O_NONBLOCK (a FIFO there must not hang the open),
/// and must be a regular file of the caller's own.
public final class FileLock {
    public enum Failure: Error, Equatable {
        /// The lock file could not be opened or created.
        case cannotOpen(errno: Int32)
        /// A symbolic link stands at the lock file's name.
        case symbolicLink
        /// What stands there is not a regular file, or another user owns it.
        case notOwnRegularFile
        /// flock failed for a reason other than another holder.
        case cannotLock(errno: Int32)
        /// Another process held the lock past the deadline.
        case timedOut
    }

    private var descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { release() }

    /// Releases the lock now rather than when the value goes.
    public func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Opens (creating it 0600 if need be) and locks `path`, waiting at most
    /// `timeoutMilliseconds`. The directory must exist.
    public static func acquire(_ path: String, timeoutMilliseconds: Int) throws(Failure) -> FileLock {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else { throw errno == ELOOP ? .symbolicLink : .cannotOpen(errno: errno) }
        let lock = FileLock(descriptor: descriptor)
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid() else {
            throw .notOwnRegularFile
        }
        let deadline = MonotonicClock.milliseconds() + Int64(timeoutMilliseconds)
        var backoffMicroseconds: UInt32 = 500
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw .cannotLock(errno: errno) }
            let remaining = deadline - MonotonicClock.milliseconds()
            guard remaining > 0 else { throw .timedOut }
            // Jitter keeps many waiting processes from waking in step.
            let jittered = backoffMicroseconds / 2 + UInt32.random(in: 0...backoffMicroseconds / 2)
            usleep(min(jittered, UInt32(clamping: remaining * 1000)))
            backoffMicroseconds = min(backoffMicroseconds * 2, 50_000)
        }
        return lock
    }
}
