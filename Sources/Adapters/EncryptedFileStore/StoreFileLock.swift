import Basics
import PortalTokenCore

/// The store file's lock, `<file>.lock`, and the store lock of the file backend
/// (docs/storage.md, "The store lock"): the caller holds it around a whole change (a session's
/// read, decision and write, the hook's once), and the store's own writes take the same lock
/// inside, so a write takes one `flock`. Reentrant within the process that holds it; every
/// process that shares the file, whatever its runtime directory, shares its lock.
public final class StoreFileLock: SessionLock {
    private let files: StoreFileSystem
    private let timeoutMilliseconds: Int
    private var held: FileLock?
    private var depth = 0

    public init(path: String, timeoutMilliseconds: Int) {
        files = StoreFileSystem(path: path)
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    public func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        try enter()
        defer { leave() }
        return try body()
    }

    private func enter() throws(StoreError) {
        if depth == 0 { held = try files.lock(timeoutMilliseconds: timeoutMilliseconds) }
        depth += 1
    }

    private func leave() {
        depth -= 1
        if depth == 0 {
            held?.release()
            held = nil
        }
    }
}
