import Glibc
import Synchronization

/// The core-file limit (docs/security.md, "Hardening rules"): portal-token lowers its own soft
/// `RLIMIT_CORE` to 0 and leaves the hard limit as its caller set it, so that the programs it
/// starts (exec's command, the hook, xdg-open, notify-send, git) get the caller's limits back
/// rather than a ban they could never lift. The ban that does not depend on the limit,
/// `PR_SET_DUMPABLE` 0, is portal-token's alone: execve resets it for the program that follows.
public enum CoreFileLimit {
    struct Limits: Sendable {
        var soft: rlim_t
        var hard: rlim_t
    }

    /// The caller's limits, once `forbid` has lowered them; the lock also keeps two spawns from
    /// interleaving their raise and lower.
    private static let caller = Mutex<Limits?>(nil)
    private static let resource = __rlimit_resource_t(RLIMIT_CORE.rawValue)

    /// Remembers the caller's limits and lowers the soft one to 0. True when it took effect.
    @discardableResult
    public static func forbid() -> Bool {
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return false }
        caller.withLock { $0 = Limits(soft: limits.rlim_cur, hard: limits.rlim_max) }
        limits.rlim_cur = 0
        return setrlimit(resource, &limits) == 0
    }

    /// Runs `body`, which starts a child, with the caller's limits in force, so that the child
    /// inherits them; lowered again once it returns. portal-token itself cannot dump core in
    /// between: it is not dumpable.
    public static func withCallerLimits(_ body: () -> Void) {
        caller.withLock { limits in
            guard let limits else { return body() }
            var restored = rlimit(rlim_cur: limits.soft, rlim_max: limits.hard)
            _ = setrlimit(resource, &restored)
            body()
            restored.rlim_cur = 0
            _ = setrlimit(resource, &restored)
        }
    }
}
