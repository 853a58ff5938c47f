import Basics
import Glibc

extension StoreError {
    /// What a lock file that could not be taken means to the user (exit 4). A timeout is the
    /// caller's to word (`timedOut`), since it knows what the lock guards.
    public init(_ failure: FileLock.Failure, lockPath: String, timedOut: @autoclosure () -> StoreError) {
        let removeHint = "remove it; portal-token creates the lock file itself"
        switch failure {
        case .timedOut:
            self = timedOut()
        case .symbolicLink:
            self.init(.failed, "the lock file \(lockPath) is a symbolic link", hint: removeHint)
        case .notOwnRegularFile:
            self.init(.failed, "the lock file \(lockPath) is not a regular file of your own", hint: removeHint)
        case .cannotOpen(let number):
            self.init(
                .failed, "cannot open the lock file \(lockPath): \(String(cString: strerror(number)))",
                hint: Self.hint(errno: number, lockPath: lockPath))
        case .cannotLock(let number):
            self.init(.failed, "cannot lock \(lockPath): \(String(cString: strerror(number)))")
        }
    }

    private static func hint(errno number: Int32, lockPath: String) -> String? {
        switch number {
        case ENOSPC, EDQUOT: return "free some space on that file system"
        case EACCES, EPERM:
            let directory = lockPath.lastIndex(of: "/").map { String(lockPath[..<$0]) } ?? "."
            return "check the permissions of \(directory.isEmpty ? "/" : directory)"
        case EROFS: return "the file system is read-only"
        default: return nil
        }
    }
}

extension StoreError {
    /// What a directory that failed `PrivateDirectory`'s checks means to the user (exit 4):
    /// `what` names it ("the store directory …"), the hints say how to fix each case.
    public init(_ failure: PrivateDirectory.Failure, _ what: String, ownerHint: String, modeHint: String) {
        switch failure {
        case .cannotExamine(let number):
            self.init(.failed, "cannot examine \(what): \(String(cString: strerror(number)))")
        case .foreignOwner(let uid):
            self.init(.failed, "\(what) belongs to another user (uid \(uid))", hint: ownerHint)
        case .writableByOthers(let mode):
            self.init(.failed, "\(what) is writable by other users (mode \(String(mode, radix: 8)))", hint: modeHint)
        }
    }
}
