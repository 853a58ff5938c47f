import Basics
import Glibc
import PortalTokenCore

/// The caller of a command run directly: this process, as /proc shows it (proc(5)), and the
/// chain of programs that started it. Read once per event; every fact that cannot be read is
/// left out.
enum LocalCaller {
    static func current() -> AuditCaller {
        var caller = AuditCaller(
            pid: getpid(), uid: getuid(), gid: getgid(), userNamespace: userNamespace(),
            executable: executable(of: "self"))
        var pid = getppid()
        while pid > 1, caller.parents.count < AuditCaller.maximumParents {
            caller.parents.append(executable(of: String(pid)) ?? name(of: pid).map { "(\($0))" } ?? "(\(pid))")
            guard let parent = parentPID(of: pid) else { break }
            pid = parent
        }
        return caller
    }

    /// `/proc/PID/exe`: readable for the user's own processes; another user's (a root sshd)
    /// gives its name from `comm` instead.
    static func executable(of pid: String) -> String? {
        link("/proc/\(pid)/exe")
    }

    static func userNamespace() -> UInt64? {
        // "user:[4026531837]"
        guard let text = link("/proc/self/ns/user"), let open = text.firstIndex(of: "["),
            let close = text.lastIndex(of: "]")
        else { return nil }
        return UInt64(text[text.index(after: open)..<close])
    }

    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `/proc/PID/stat`'s fourth field; the name, which may hold spaces and parentheses, ends at the
    /// last `)`.
    static func parentPID(of pid: pid_t) -> pid_t? {
        guard let text = read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    static func name(of pid: pid_t) -> String? {
        read("/proc/\(pid)/comm").map { $0.trimmingWhitespace }
    }

    private static func read(_ path: String) -> String? {
        (try? FileReading.contents(of: path, limit: 4096, regularOnly: false)).map {
            String(decoding: $0, as: UTF8.self)
        }
    }
}
