import Glibc

/// CLOCK_MONOTONIC: never moved by a wall-clock change, so deadlines and idle times measured
/// with it hold when the user or NTP sets the time.
public enum MonotonicClock {
    public static func nanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    public static func microseconds() -> Int64 { nanoseconds() / 1000 }

    public static func milliseconds() -> Int64 { nanoseconds() / 1_000_000 }
}
