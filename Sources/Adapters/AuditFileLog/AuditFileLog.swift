import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// The audit log as a file (docs/audit.md): `audit.jsonl` in a private directory, one JSON line
/// per event, each appended with one `write(2)` under `O_APPEND` so that lines from concurrent
/// writers never interleave; rotated to `audit.jsonl.1` when the next line would take it past
/// `maximumBytes`. The token fingerprint's key, `audit.key`, lies beside it.
///
/// Rotation and writes share one exclusive `flock` on the log file itself, held from the size
/// check to the write: writers that each checked the size under a shared lock could together
/// write past the cap. A writer whose file was renamed meanwhile opens the new one. So no line is
/// lost or written past the cap; a writer waits only for another's single write or rename.
public final class AuditFileLog: AuditLog {
    public static let fileName = "audit.jsonl"
    public static let keyFileName = "audit.key"

    public let directory: String
    public let maximumBytes: Int
    private let warn: (_ message: String, _ hint: String?) -> Void
    /// Given each line as well, written or not (the systemd journal's copy).
    private let forward: ((_ line: [UInt8]) -> Void)?

    public var path: String { directory + "/" + Self.fileName }
    public var rotatedPath: String { path + ".1" }
    var keyPath: String { directory + "/" + Self.keyFileName }

    /// - Parameter warn: says once per process that the log cannot be written.
    public init(
        directory: String, maximumBytes: Int, warn: @escaping (String, String?) -> Void,
        forward: ((_ line: [UInt8]) -> Void)? = nil
    ) {
        self.directory = directory
        self.maximumBytes = maximumBytes
        self.warn = warn
        self.forward = forward
    }

    /// A process at the other end of a socket, as the kernel named it by `pid` (`SO_PEERCRED`):
    /// what /proc shows of it, read as for this process's own lines (docs/audit.md, "Fields").
    public static func caller(ofProcess pid: Int32) -> AuditCaller { LocalCaller.process(pid) }

    /// Whether this process has said that the log cannot be written: once is enough.
    private static let hasWarned = Atomic<Bool>(false)

    /// For tests: the next failure warns again.
    static func resetWarning() { hasWarned.store(false, ordering: .relaxed) }

    /// How long a write waits for a rotation by another process; past it, the line is dropped
    /// with the warning.
    static let lockTimeoutMilliseconds: Int64 = 2000

    public func record(_ event: AuditEvent) {
        var failure: Failure?
        do {
            try prepareDirectory()
        } catch {
            failure = error
        }
        // The key is read only for an event with a token (most `get`s for other hosts have none),
        // and only from a directory that passed its checks.
        var fingerprint: String?
        if let token = event.token, failure == nil, let key = try? readOrCreateKey() {
            fingerprint = AuditFingerprint.of(token, key: key)
        }
        let line = event.line(
            time: event.time ?? Self.wallClockNanoseconds(), caller: event.caller ?? LocalCaller.current(),
            fingerprint: fingerprint)
        forward?(line)
        if failure == nil {
            do {
                try append(line)
            } catch {
                failure = error
            }
        }
        guard let failure,
            Self.hasWarned.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
        else { return }
        warn("cannot write the audit log \(path): \(failure.reason)", failure.hint)
    }

    public func lines() throws(AuditLogError) -> [String] {
        var result: [String] = []
        for file in [rotatedPath, path] {
            let bytes: [UInt8]
            do {
                bytes = try FileReading.contents(of: file, limit: max(maximumBytes, Settings.defaultAuditLogBytes) * 2)
            } catch .missing {
                continue
            } catch {
                throw AuditLogError("cannot read the audit log \(file): \(Self.describe(error))")
            }
            for line in bytes.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
                result.append(String(decoding: line, as: UTF8.self))
            }
        }
        return result
    }

    // MARK: Writing

    struct Failure: Error {
        let reason: String
        var hint: String?
    }

    /// The directory, created 0700 when missing; it must be the user's own and writable by no
    /// one else, as the store's directory must (PrivateDirectory).
    private func prepareDirectory() throws(Failure) {
        do {
            if try PrivateDirectory.check(directory) { return }
        } catch {
            throw Self.directoryFailure(error, directory)
        }
        do {
            try Directories.create(directory)
        } catch {
            throw Failure(
                reason: "cannot create \(error.path): \(error.reason)",
                hint: "check that \(Self.parent(of: directory)) is yours and writable")
        }
        do {
            try PrivateDirectory.check(directory)
        } catch {
            throw Self.directoryFailure(error, directory)
        }
    }

    private static func directoryFailure(_ failure: PrivateDirectory.Failure, _ directory: String) -> Failure {
        switch failure {
        case .cannotExamine(let number):
            return Failure(reason: "cannot examine \(directory): \(String(cString: strerror(number)))")
        case .foreignOwner(let uid):
            return Failure(
                reason: "its directory belongs to another user (uid \(uid))",
                hint: "remove \(directory), or set XDG_STATE_HOME to a directory of your own")
        case .writableByOthers(let mode):
            return Failure(
                reason: "other users can write to its directory (mode \(String(mode, radix: 8)))",
                hint: "restrict it with 'chmod 700 \(directory)'")
        }
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// Appends `line` with one write, rotating first when it would take the file past the cap.
    private func append(_ line: [UInt8]) throws(Failure) {
        let deadline = MonotonicClock.milliseconds() + Self.lockTimeoutMilliseconds
        while true {
            guard MonotonicClock.milliseconds() < deadline else {
                throw Failure(reason: "it kept being rotated for more than 2 seconds")
            }
            let descriptor = try openLog()
            defer { close(descriptor) }
            try lock(descriptor, LOCK_EX, deadline: deadline)
            // A rotation between the open and the lock renamed this file away: open the new one.
            guard try isCurrent(descriptor) else { continue }
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw Self.systemFailure("cannot examine it", errno) }
            if Int(status.st_size) > 0, Int(status.st_size) + line.count > maximumBytes {
                guard rename(path, rotatedPath) == 0 else {
                    throw Self.systemFailure("cannot rotate it to \(rotatedPath)", errno)
                }
                continue
            }
            let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == line.count else {
                throw Self.systemFailure("cannot write to it", written < 0 ? errno : ENOSPC)
            }
            return
        }
    }

    /// Opens the log for appending, creating it 0600; it must be a regular file of the user's own
    /// that no one else may write. O_NOFOLLOW: a link planted at its name is refused; O_NONBLOCK:
    /// a FIFO there cannot hang the command.
    private func openLog() throws(Failure) -> Int32 {
        let descriptor = open(
            path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else {
            let number = errno
            switch number {
            case ELOOP: throw Failure(reason: "it is a symbolic link", hint: "remove \(path)")
            case EISDIR: throw Failure(reason: "it is a directory", hint: "remove \(path)")
            case ENXIO: throw Failure(reason: "it is not a regular file", hint: "remove \(path)")
            default: throw Self.systemFailure("cannot open it", number)
            }
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw Failure(reason: "it is not a regular file", hint: "remove \(path)")
        }
        guard status.st_uid == geteuid() else {
            close(descriptor)
            throw Failure(reason: "it belongs to another user (uid \(status.st_uid))", hint: "remove \(path)")
        }
        guard status.st_mode & 0o022 == 0 else {
            close(descriptor)
            throw Failure(
                reason: "other users can write to it (mode \(String(status.st_mode & 0o7777, radix: 8)))",
                hint: "restrict it with 'chmod 600 \(path)'")
        }
        return descriptor
    }

    /// Whether the open file is still the one at the log's name.
    private func isCurrent(_ descriptor: Int32) throws(Failure) -> Bool {
        var open = stat(), named = stat()
        guard fstat(descriptor, &open) == 0 else { throw Self.systemFailure("cannot examine it", errno) }
        guard stat(path, &named) == 0 else {
            if errno == ENOENT { return false }
            throw Self.systemFailure("cannot examine it", errno)
        }
        return open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// flock, waiting at most until `deadline` (a rotation is one rename).
    private func lock(_ descriptor: Int32, _ operation: Int32, deadline: Int64) throws(Failure) {
        var pause: UInt32 = 200
        while flock(descriptor, operation | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw Self.systemFailure("cannot lock it", errno) }
            guard MonotonicClock.milliseconds() < deadline else {
                throw Failure(reason: "another process held it locked for more than 2 seconds")
            }
            usleep(pause / 2 + UInt32.random(in: 0...pause / 2))
            pause = min(pause * 2, 20_000)
        }
    }

    private static func systemFailure(_ what: String, _ number: Int32) -> Failure {
        let hint: String? =
            number == EACCES || number == EROFS || number == EPERM
            ? "make its directory writable by you, or turn the log off with 'audit-log = off' in your config file"
            : nil
        return Failure(reason: "\(what): \(String(cString: strerror(number)))", hint: hint)
    }

    // MARK: The fingerprint key

    /// The key of the token fingerprints: 32 random bytes, made once by the first writer
    /// (written to a temporary file, then linked into place, so a reader never sees half a key and
    /// two first writers agree on one).
    func readOrCreateKey() throws(Failure) -> [UInt8] {
        if let key = try readKey() { return key }
        var template = Array((keyPath + ".XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw Self.systemFailure("cannot create its key", errno) }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(temporary) }
        var key = Sodium.randomBytes(AuditFingerprint.keyBytes)
        defer { zeroize(&key) }
        let written = key.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == key.count, synced else { throw Self.systemFailure("cannot write its key", errno) }
        if link(temporary, keyPath) != 0 && errno != EEXIST {
            throw Self.systemFailure("cannot create its key", errno)
        }
        guard let stored = try readKey() else { throw Failure(reason: "its key vanished") }
        return stored
    }

    private func readKey() throws(Failure) -> [UInt8]? {
        let bytes: [UInt8]
        do {
            bytes = try FileReading.contents(of: keyPath, limit: 64, ownOnly: true)
        } catch .missing {
            return nil
        } catch {
            throw Failure(reason: "cannot read its key \(keyPath): \(Self.describe(error))")
        }
        guard bytes.count == AuditFingerprint.keyBytes else {
            throw Failure(reason: "its key \(keyPath) is damaged", hint: "remove it; a new one is made")
        }
        return bytes
    }

    private static func describe(_ failure: FileReading.Failure) -> String {
        switch failure {
        case .missing: return "no such file"
        case .tooLarge: return "too large"
        default: return failure.reason
        }
    }

    static func wallClockNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
