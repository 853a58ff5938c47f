import Basics
import Synchronization

/// A secret cache in this process's memory, with the kernel keyring's rules (an idle timeout
/// that each read starts again, and a cap): what a long-lived agent keeps its file-store keys
/// and session copies in where the kernel refuses keyrings (docs/agent.md, "Where the keys are
/// kept"). The process forbids dumps, and entries are wiped when dropped or replaced.
public final class MemorySecretCache: SecretCache, Sendable {
    private struct Entry {
        var secret: Secret
        var idleMilliseconds: Int64
        var lastUsedAt: Int64
        var deadline: Int64
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let now: @Sendable () -> Int64

    /// `now` is a monotonic clock in milliseconds.
    public init(now: @escaping @Sendable () -> Int64 = { MonotonicClock.milliseconds() }) {
        self.now = now
    }

    public func read(_ name: String) -> Secret? {
        let now = self.now()
        return entries.withLock { entries in
            guard var entry = entries[name] else { return nil }
            guard now < entry.deadline, now - entry.lastUsedAt < entry.idleMilliseconds else {
                entries[name] = nil
                return nil
            }
            entry.lastUsedAt = now
            entries[name] = entry
            return entry.secret
        }
    }

    public func store(_ secret: Secret, as name: String, idleSeconds: Int, maximumSeconds: Int) {
        guard idleSeconds > 0, maximumSeconds > 0 else { return }
        let now = self.now()
        entries.withLock { entries in
            entries[name] = Entry(
                secret: secret, idleMilliseconds: Int64(min(idleSeconds, maximumSeconds)) * 1000, lastUsedAt: now,
                deadline: now + Int64(maximumSeconds) * 1000)
        }
    }

    public func drop(_ name: String) {
        entries.withLock { $0[name] = nil }
    }

    public func dropAll(where isDropped: (String) -> Bool) {
        entries.withLock { entries in
            for name in entries.keys where isDropped(name) { entries[name] = nil }
        }
    }
}
