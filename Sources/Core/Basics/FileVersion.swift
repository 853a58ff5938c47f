import Glibc

/// What tells one version of a file from another without reading it: a write that replaces the
/// file by rename gives it a new inode; an edit in place or a chmod changes its size or times.
public struct FileVersion: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification and status-change times, in nanoseconds.
    public var modified: Int64
    public var changed: Int64

    public init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        changed = Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec)
    }

    /// The version of the file at `path` now (links followed); nil when there is none.
    public static func of(_ path: String) -> FileVersion? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileVersion(status)
    }
}
