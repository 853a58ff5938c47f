import Basics
import Glibc
import PortalTokenCore

/// The store's file operations: reading with an ownership check, a bounded lock, a write that
/// replaces the file atomically and durably, and moving a damaged file aside.
///
/// Paths (docs/storage.md, "Paths"): the directory and the file must be the user's own and writable
/// by no one else, or another user could roll the store back or plant files (exit 4 with a
/// hint); the lock file is opened without following a symlink; the store file must be a regular
/// file, opened without blocking (a FIFO is refused at once, never waited on), of at most
/// `maximumFileBytes` (a larger one is moved aside as damaged, and never allocated).
struct StoreFileSystem {
    let path: String

    /// Far above any real store (a few kilobytes per credential), far below what would hurt.
    static let maximumFileBytes = 64 << 20

    var directory: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    var name: String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    var lockPath: String { path + ".lock" }

    // MARK: Reading

    /// What was read, and the file it came from (compared to tell whether it changed).
    struct Contents: Equatable {
        var bytes: [UInt8]
        var identity: FileVersion
        /// Why the file is damaged before a byte of it is decoded (it is too large); its bytes
        /// are then not read.
        var damage: String? = nil
    }

    /// The identity of the file there now, without reading it; nil when there is none.
    func identity() throws(StoreError) -> FileVersion? {
        guard try checkDirectory() else { return nil }
        return FileVersion.of(path)
    }

    /// The whole file, or nil when there is none. A file another user owns, or that others
    /// may read or write, is refused before a byte of it is used.
    func read() throws(StoreError) -> Contents? {
        guard try checkDirectory() else { return nil }
        let file: RegularFile
        do {
            file = try RegularFile(path)
        } catch .missing {
            return nil
        } catch .notRegular {
            throw StoreError(
                .failed, "the store file \(path) is not a regular file",
                hint: "point PORTAL_TOKEN_FILE at a file, or remove what is there")
        } catch {
            throw failure("cannot open the store file \(path)", error)
        }
        let status = file.status
        try Self.requireOwn(
            status, "the store file \(path)", forbidden: 0o077, exposure: "is open to other users",
            ownerHint: "point PORTAL_TOKEN_FILE at a store of your own",
            modeHint: "if only you have used it, restrict it with 'chmod 600 \(path)' and try again")
        if Int64(status.st_size) > Int64(Self.maximumFileBytes) {
            return Contents(
                bytes: [], identity: FileVersion(status),
                damage:
                    """
                    it is \(status.st_size >> 20) MiB, larger than the \(Self.maximumFileBytes >> 20) MiB a store \
                    may be
                    """
            )
        }
        let bytes: [UInt8]
        do {
            bytes = try file.readAll(limit: Self.maximumFileBytes)
        } catch .tooLarge {
            // Grown since fstat: still bounded.
            return Contents(
                bytes: [], identity: FileVersion(status),
                damage: "it grew past the \(Self.maximumFileBytes >> 20) MiB a store may be while it was read")
        } catch {
            throw failure("cannot read the store file \(path)", error)
        }
        return Contents(bytes: bytes, identity: FileVersion(status))
    }

    // MARK: Locking

    /// An exclusive lock on `<name>.lock`, never on the store file itself: a rename replaces the
    /// store file's inode, and a lock held on the old one would guard nothing.
    typealias Lock = FileLock

    /// Waits for the lock up to `timeoutMilliseconds`, then gives up with exit 4 rather than hang.
    func lock(timeoutMilliseconds: Int) throws(StoreError) -> Lock {
        try createDirectory()
        _ = try checkDirectory()
        do {
            return try FileLock.acquire(lockPath, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            throw StoreError(
                error, lockPath: lockPath,
                timedOut: StoreError(
                    .timedOut, "the store file \(path) is locked by another process",
                    hint: "try again; if it stays locked, see which process holds it with 'fuser \(lockPath)'"))
        }
    }

    // MARK: Writing

    private var temporaryPrefix: String { ".\(name).tmp-" }

    /// Temporary files are only ever made by a writer holding the lock, so whoever holds it
    /// now knows any it finds belong to a writer that died (SIGKILL, power cut) before its
    /// rename. They hold only ciphertext; they are removed so they do not pile up.
    func removeAbandonedTemporaryFiles() {
        guard let stream = opendir(directory) else { return }
        defer { closedir(stream) }
        var abandoned: [String] = []
        while let entry = readdir(stream) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if entryName.hasPrefix(temporaryPrefix) && entryName.count == temporaryPrefix.count + 6 {
                abandoned.append(entryName)
            }
        }
        for entryName in abandoned { unlink("\(directory)/\(entryName)") }
    }

    /// Replaces the store file with `bytes` (`AtomicFile`): a crash at any point leaves the old
    /// file or the new one, and on failure the store file is untouched.
    func replace(with bytes: [UInt8]) throws(StoreError) {
        try createDirectory()
        _ = try checkDirectory()
        do {
            try AtomicFile.replace(path, with: bytes, temporaryPrefix: temporaryPrefix)
        } catch {
            switch error.step {
            case .create: throw failure("cannot create a file in \(directory)", errno: error.number)
            case .write: throw failure("cannot write the store file \(path)", errno: error.number)
            case .rename: throw failure("cannot replace the store file \(path)", errno: error.number)
            }
        }
    }

    /// Refuses a store directory another user owns or others may write: they could replace
    /// the file with an older copy, or plant the lock and temporary names. False when it does
    /// not exist (nothing to read yet).
    @discardableResult
    func checkDirectory() throws(StoreError) -> Bool {
        do {
            return try PrivateDirectory.check(directory)
        } catch .cannotExamine(let number) {
            throw failure("cannot examine the store directory \(directory)", errno: number)
        } catch {
            throw StoreError(
                error, "the store directory \(directory)",
                ownerHint: "set PORTAL_TOKEN_FILE to a path in a directory of your own",
                modeHint:
                    """
                    restrict it with 'chmod go-w \(directory)', or set PORTAL_TOKEN_FILE to a path in a directory \
                    of your own
                    """
            )
        }
    }

    /// Refuses what another user owns, or what the `forbidden` mode bits open to others.
    private static func requireOwn(
        _ status: stat, _ what: String, forbidden: mode_t, exposure: String,
        ownerHint: String, modeHint: String
    ) throws(StoreError) {
        guard status.st_uid == geteuid() else {
            throw StoreError(.failed, "\(what) belongs to another user (uid \(status.st_uid))", hint: ownerHint)
        }
        guard status.st_mode & forbidden == 0 else {
            let mode = String(status.st_mode & 0o7777, radix: 8)
            throw StoreError(.failed, "\(what) \(exposure) (mode \(mode))", hint: modeHint)
        }
    }

    /// Creates the directory and any missing parent with mode 0700 from the start (XDG Base
    /// Directory Specification: "created with permissions 0700"), never changing an existing one.
    func createDirectory() throws(StoreError) {
        do {
            try Directories.create(directory)
        } catch {
            throw failure("cannot create the directory \(error.path)", errno: error.number)
        }
    }

    // MARK: Moving aside

    /// Renames the store file to `<name>.<reason>-<UTC time>` (never over an earlier one; a
    /// damaged file, or one migrated to the keyring) and returns the new path. The caller holds
    /// the lock.
    func moveAside(as reason: String = "damaged") throws(StoreError) -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let stamp =
            String(Int(parts.tm_year) + 1900) + twoDigits(parts.tm_mon + 1) + twoDigits(parts.tm_mday)
            + "T" + twoDigits(parts.tm_hour) + twoDigits(parts.tm_min) + twoDigits(parts.tm_sec) + "Z"
        var attempt = 1
        while true {
            let aside = "\(path).\(reason)-\(stamp)" + (attempt == 1 ? "" : "-\(attempt)")
            // link then unlink: unlike rename, link refuses to replace an earlier copy.
            if link(path, aside) == 0 {
                unlink(path)
                AtomicFile.syncDirectory(directory)
                return aside
            }
            guard errno == EEXIST, attempt < 100 else {
                throw failure("cannot move the \(reason) store file \(path) aside", errno: errno)
            }
            attempt += 1
        }
    }

    private func twoDigits(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }

    private func failure(_ message: String, _ reading: FileReading.Failure) -> StoreError {
        switch reading {
        case .missing: return failure(message, errno: ENOENT)
        case .unreadable(let number): return failure(message, errno: number)
        default: return StoreError(.failed, "\(message): \(reading.reason)")
        }
    }

    private func failure(_ message: String, errno number: Int32) -> StoreError {
        var hint: String?
        switch number {
        case ENOSPC, EDQUOT: hint = "free some space on that file system; the store file is unchanged"
        case EACCES, EPERM: hint = "check the permissions of \(directory)"
        case EROFS: hint = "the file system is read-only; set PORTAL_TOKEN_FILE to a writable place"
        default: break
        }
        return StoreError(.failed, "\(message): \(String(cString: strerror(number)))", hint: hint)
    }
}
