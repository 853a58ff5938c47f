import Glibc

/// This process's own user, as the far end of a socket shows it (client mode's agent, the
/// proxy's upstream socket).
public enum OwnUser {
    /// Whether a listener of uid `uid` runs as this user: its uid is this process's own, or, for
    /// a process in a user namespace that does not map the listener's uid (a rootless container),
    /// the kernel's overflow uid, which is all such a process can be told.
    public static func isListener(uid: uid_t) -> Bool {
        if uid == getuid() { return true }
        guard let overflow = number(in: "/proc/sys/kernel/overflowuid"), uid == overflow else { return false }
        return !inInitialUserNamespace()
    }

    /// Whether this process's uid map is the initial namespace's identity map of every uid.
    private static func inInitialUserNamespace() -> Bool {
        guard let bytes = try? FileReading.contents(of: "/proc/self/uid_map", limit: 65_536) else { return true }
        let fields = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        return fields == ["0", "0", "4294967295"]
    }

    private static func number(in path: String) -> uid_t? {
        guard let bytes = try? FileReading.contents(of: path, limit: 64) else { return nil }
        return uid_t(String(decoding: bytes, as: UTF8.self).trimmingWhitespace)
    }
}
