import Basics
import Glibc
import PortalTokenCore

/// The caller of a command run directly: this process, as /proc shows it (proc(5)), and the
/// chain of programs that started it; or, for a request on a socket, the peer the kernel named.
/// Read once per event, as bytes (this runs on every `get`); every fact that cannot be read is
/// left out.
enum LocalCaller {
    static func current() -> AuditCaller {
        var caller = AuditCaller(
            pid: getpid(), uid: getuid(), gid: getgid(), userNamespace: userNamespace("/proc/self/ns/user"),
            executable: FileReading.link("/proc/self/exe"))
        caller.parents = parents(from: getppid())
        return caller
    }

    /// Another process, by the pid the kernel gave for it (`SO_PEERCRED`): its executable, user
    /// namespace and parents as /proc shows them now. Its uid and gid are the caller's to fill in,
    /// from the same word of the kernel; a pid that is not a process of this namespace (0) gives
    /// nothing more.
    static func process(_ pid: pid_t) -> AuditCaller {
        guard pid > 0 else { return AuditCaller() }
        var caller = AuditCaller(
            pid: pid, userNamespace: userNamespace("/proc/\(pid)/ns/user"),
            executable: FileReading.link("/proc/\(pid)/exe"))
        if let stat = read("/proc/\(pid)/stat") {
            if caller.executable == nil { caller.executable = name(inStat: stat).map { "(\($0))" } }
            if let parent = parentPID(inStat: stat) { caller.parents = parents(from: parent) }
        }
        return caller
    }

    /// The executables of `pid` and its ancestors, nearest first, stopping before pid 1.
    private static func parents(from start: pid_t) -> [String] {
        var parents: [String] = []
        var pid = start
        while pid > 1, parents.count < AuditCaller.maximumParents {
            // `/proc/PID/exe` is readable for the user's own processes; another user's (a root
            // sshd) is named by its `comm` instead, in parentheses.
            let stat = read("/proc/\(pid)/stat")
            parents.append(FileReading.link("/proc/\(pid)/exe") ?? stat.flatMap(name(inStat:)).map { "(\($0))" } ?? "?")
            guard let stat, let parent = parentPID(inStat: stat) else { break }
            pid = parent
        }
        return parents
    }

    /// The inode number of a `/proc/PID/ns/user` link, which reads "user:[4026531837]".
    static func userNamespace(_ path: String) -> UInt64? {
        guard let text = FileReading.link(path) else { return nil }
        let bytes = Array(text.utf8)
        guard let open = bytes.firstIndex(of: UInt8(ascii: "[")), let close = bytes.lastIndex(of: UInt8(ascii: "]")),
            open < close
        else { return nil }
        return number(bytes[(open + 1)..<close]).map(UInt64.init)
    }

    /// `/proc/PID/stat`'s fourth field. The name (the second, in parentheses) may hold spaces
    /// and parentheses itself, so the fields after it start after the last `)`.
    static func parentPID(inStat bytes: [UInt8]) -> pid_t? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // ") S 1234 …": the state, then the parent's pid.
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 3)
        return fields.count > 2 ? number(fields[1]).flatMap { pid_t(exactly: $0) } : nil
    }

    static func name(inStat bytes: [UInt8]) -> String? {
        guard let open = bytes.firstIndex(of: UInt8(ascii: "(")), let close = bytes.lastIndex(of: UInt8(ascii: ")")),
            open < close
        else { return nil }
        return String(decoding: bytes[(open + 1)..<close], as: UTF8.self)
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count < 19 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(digit - UInt8(ascii: "0"))
        }
        return value
    }

    /// A small /proc file: one read is the whole of it.
    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        bytes.removeSubrange(count...)
        return bytes
    }
}
