import Glibc

/// One spelling for one file: what the caches name a store file after, so that the same file
/// reached by two spellings (`./store`, a symlinked directory, `a//b`) is one entry.
public enum CanonicalPath {
    /// `realpath(3)` of `path`; for a file not there yet, its directory's real path and its name
    /// (so the spelling does not change when the file is created); `path` itself when neither
    /// resolves.
    public static func of(_ path: String) -> String {
        if let resolved = resolve(path) { return resolved }
        guard let slash = path.lastIndex(of: "/") else { return resolve(".").map { $0 + "/" + path } ?? path }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        let name = path[path.index(after: slash)...]
        guard !name.isEmpty, name != ".", name != "..", let base = resolve(directory) else { return path }
        return (base == "/" ? "" : base) + "/" + name
    }

    private static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
