import Glibc

/// Replaces a file whole so that a crash at any point leaves the old file or the new one: a
/// temporary file in the same directory (mkstemp: mode 0600 from the start), written and fsynced,
/// renamed over the file, and the directory fsynced so the rename itself survives a power cut.
/// On failure the temporary file is removed and the file is untouched.
public enum AtomicFile {
    public enum Step: Sendable {
        /// The temporary file could not be created in the directory.
        case create
        /// Writing, syncing or closing it failed.
        case write
        /// Renaming it over the file failed.
        case rename
    }

    public struct Failure: Error, Equatable {
        public let step: Step
        public let number: Int32
        /// The C library's words for errno (strerror).
        public var reason: String { String(cString: strerror(number)) }
    }

    /// The temporary files' names: `temporaryPrefix` and six characters from mkstemp.
    public static func replace(_ path: String, with bytes: [UInt8], temporaryPrefix: String) throws(Failure) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        var template = Array("\(directory.isEmpty ? "" : directory)/\(temporaryPrefix)XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw Failure(step: .create, number: errno) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        let temporaryPath = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var closed = false
        do throws(Failure) {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { raw in
                    write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure(step: .write, number: errno)
                }
                offset += written
            }
            guard fsync(descriptor) == 0 else { throw Failure(step: .write, number: errno) }
            closed = true
            // close can report a deferred write error (NFS); it must not pass unnoticed.
            guard close(descriptor) == 0 else { throw Failure(step: .write, number: errno) }
            guard rename(temporaryPath, path) == 0 else { throw Failure(step: .rename, number: errno) }
        } catch {
            if !closed { close(descriptor) }
            unlink(temporaryPath)
            throw error
        }
        syncDirectory(directory.isEmpty ? "/" : directory)
    }

    /// Makes a rename or unlink in `directory` durable.
    public static func syncDirectory(_ directory: String) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}
