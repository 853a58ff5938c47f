import Basics
import Glibc

/// Runs `body` with the spawn attributes every child portal-token starts gets (the hook, a
/// browser, a notification): a process group of its own, so a terminal's Ctrl-C and a timeout's
/// group kill reach only that child and its descendants; an empty signal mask; every signal
/// portal-token or its runtime ignores (SIGPIPE above all) reset to its default (glibc refuses to
/// reset the few signals it reserves, which is fine); and the caller's core-file limits, not the
/// 0 portal-token runs with (docs/security.md, "Hardening rules").
public func withChildSpawnAttributes<Result>(_ body: (inout posix_spawnattr_t) -> Result) -> Result {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setpgroup(&attributes, 0)
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    var defaultSignals = sigset_t()
    sigemptyset(&defaultSignals)
    for signal in Int32(1)...64 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaultSignals, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var result: Result?
    CoreFileLimit.withCallerLimits { result = body(&attributes) }
    return result!
}
