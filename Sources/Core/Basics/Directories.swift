import Glibc

/// `mkdir -p`, with each directory it creates 0700 from the start (XDG Base Directory
/// Specification: "created with permissions 0700"); an existing one is never changed.
public enum Directories {
    /// Creates `directory` and any missing parent. A relative path is taken from the current
    /// directory. The error names the first directory that could not be created.
    public static func create(_ directory: String, mode: mode_t = 0o700) throws(SystemCallError) {
        var status = stat()
        if stat(directory, &status) == 0 { return }
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, mode) != 0 && errno != EEXIST {
                throw SystemCallError(path: prefix, errno: errno)
            }
        }
    }

    /// Creates the directories above the file at `path`.
    public static func createParent(of path: String, mode: mode_t = 0o700) throws(SystemCallError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        guard slash != path.startIndex else { return }
        try create(String(path[..<slash]), mode: mode)
    }
}
