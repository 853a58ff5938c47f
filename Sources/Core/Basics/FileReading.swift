import Glibc

/// Reading small files whole, always with a bound, without Foundation.
public enum FileReading {
    public enum Failure: Error, Equatable {
        case missing, unreadable(errno: Int32), tooLarge, notRegular
        case foreignOwner(uid: uid_t), writableByOthers(mode: mode_t)

        /// What went wrong, in the C library's words where it has them.
        public var reason: String {
            switch self {
            case .missing: return String(cString: strerror(ENOENT))
            case .unreadable(let number): return String(cString: strerror(number))
            case .tooLarge: return "too large"
            case .notRegular: return "not a regular file"
            case .foreignOwner(let uid): return "it belongs to another user (uid \(uid))"
            case .writableByOthers(let mode): return "it is writable by other users (mode \(String(mode, radix: 8)))"
            }
        }
    }

    /// What a symbolic link names (`/proc/PID/exe`, `/proc/PID/ns/user`), at most `PATH_MAX`
    /// bytes; nil when it cannot be read (no such link, or the kernel hides it).
    public static func link(_ path: String) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(PATH_MAX)) { buffer in
            let count = readlink(path, buffer.baseAddress!, buffer.count)
            guard count > 0 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[0..<count]), as: UTF8.self)
        }
    }

    /// The config file's bound, and the default one.
    public static let defaultLimit = 1 << 20

    /// The whole file, up to `limit` bytes. With `regularOnly`, anything but a regular file (a
    /// FIFO, a device) is refused at once, never waited on; without it (a request body given as
    /// @FILE, which may be a shell's `<(…)`), a pipe is read like a file. With `ownOnly`, a file
    /// another user owns, or that group or others may write, is refused as ssh refuses such a
    /// config: whoever can write it chooses what runs and where the token goes.
    public static func contents(
        of path: String, limit: Int = defaultLimit, regularOnly: Bool = true,
        ownOnly: Bool = false
    ) throws(Failure) -> [UInt8] {
        if regularOnly {
            let file = try RegularFile(path)
            if ownOnly {
                let status = file.status
                if status.st_uid != geteuid() && status.st_uid != 0 { throw .foreignOwner(uid: status.st_uid) }
                if status.st_mode & 0o022 != 0 { throw .writableByOthers(mode: status.st_mode & 0o7777) }
            }
            if Int64(file.status.st_size) > Int64(limit) { throw .tooLarge }
            return try file.readAll(limit: limit)
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        if descriptor < 0 { throw errno == ENOENT ? .missing : .unreadable(errno: errno) }
        defer { close(descriptor) }
        return try readAll(descriptor, limit: limit)
    }

    /// Reads `descriptor` to its end; `tooLarge` once more than `limit` bytes arrive.
    static func readAll(_ descriptor: Int32, limit: Int) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = try fill(&chunk, from: descriptor, upTo: chunk.count)
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { throw .tooLarge }
            if count < chunk.count { return bytes }
        }
    }

    /// Reads into `buffer[0..<count]` until it is full or the file ends, retrying EINTR.
    /// Returns how many bytes were read.
    static func fill(_ buffer: inout [UInt8], from descriptor: Int32, upTo count: Int) throws(Failure) -> Int {
        var filled = 0
        while filled < count {
            let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, count - filled) }
            if got < 0 {
                if errno == EINTR { continue }
                throw .unreadable(errno: errno)
            }
            if got == 0 { break }
            filled += got
        }
        return filled
    }
}

/// A regular file opened for reading without blocking: a FIFO or device at the path is refused
/// at once (`notRegular`), never waited on. Closed when released.
public final class RegularFile {
    public let descriptor: Int32
    /// fstat of the open file (owner, mode, size, device and inode), for checks before use.
    public let status: stat

    public init(_ path: String) throws(FileReading.Failure) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        if descriptor < 0 { throw errno == ENOENT ? .missing : .unreadable(errno: errno) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let number = errno
            close(descriptor)
            throw .unreadable(errno: number)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw .notRegular
        }
        self.descriptor = descriptor
        self.status = status
    }

    deinit { close(descriptor) }

    /// The rest of the file; `tooLarge` once it holds more than `limit` bytes (it may have
    /// grown since it was opened).
    public func readAll(limit: Int) throws(FileReading.Failure) -> [UInt8] {
        try FileReading.readAll(descriptor, limit: limit)
    }

    /// Reads into the start of `buffer` until it is full or the file ends (for a buffer the
    /// caller wipes afterwards). Returns how many bytes were read.
    public func read(into buffer: inout [UInt8]) throws(FileReading.Failure) -> Int {
        try FileReading.fill(&buffer, from: descriptor, upTo: buffer.count)
    }
}
