import Glibc

/// The checks a directory holding the user's files must pass before anything in it is trusted:
/// another user who may write to it could rename, replace or plant what it holds (roll a store
/// back, move a lock file away while it is held). The store directory and the session lock's
/// directory both use them, so the two rules cannot drift apart.
public enum PrivateDirectory {
    public enum Failure: Error, Equatable {
        /// stat failed for a reason other than ENOENT.
        case cannotExamine(errno: Int32)
        /// Another user owns it.
        case foreignOwner(uid: uid_t)
        /// Group or others may write to it (the mode's permission bits).
        case writableByOthers(mode: mode_t)
    }

    /// The directory must be the caller's own, and writable by no one else. False when it does
    /// not exist (nothing in it to trust yet).
    @discardableResult
    public static func check(_ path: String) throws(Failure) -> Bool {
        guard let status = try status(path) else { return false }
        guard status.st_uid == geteuid() else { throw .foreignOwner(uid: status.st_uid) }
        guard status.st_mode & 0o022 == 0 else { throw .writableByOthers(mode: status.st_mode & 0o7777) }
        return true
    }

    /// For the directory that holds a private directory: no one else may rename what it holds.
    /// It must belong to the caller or to root, and when group or others may write to it, it
    /// must be sticky (as /tmp is: only an entry's owner may rename it). False when it does not
    /// exist.
    @discardableResult
    public static func checkParent(_ path: String) throws(Failure) -> Bool {
        guard let status = try status(path) else { return false }
        guard status.st_uid == geteuid() || status.st_uid == 0 else { throw .foreignOwner(uid: status.st_uid) }
        guard status.st_mode & 0o022 == 0 || status.st_mode & S_ISVTX != 0 else {
            throw .writableByOthers(mode: status.st_mode & 0o7777)
        }
        return true
    }

    private static func status(_ path: String) throws(Failure) -> stat? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw .cannotExamine(errno: errno)
        }
        return status
    }
}
