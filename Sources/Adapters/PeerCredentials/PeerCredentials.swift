import Basics
import CPeerCredentials
import Glibc
import PortalTokenCore

/// Who is on the other end of a connected Unix socket, from the kernel (docs/agent.md, "Who is
/// asking"): `SO_PEERCRED`, then the caller's `/proc` entries, tied to the process that
/// connected by a pidfd.
///
/// The pidfd comes from `SO_PEERPIDFD` where the kernel has it (6.5 and later), which names the
/// connecting process itself. Elsewhere it is opened with `pidfd_open` right after the accept,
/// and the process must have started before the connection was accepted (`/proc/PID/stat`
/// field 22 against the boot-time clock), so a pid that was reused by a later process is not
/// taken for the caller. Either way, the details are read, then the pidfd must still name a
/// live process with the same start time: the pid was not reused while they were read. When
/// any of this fails the identity says `pidVerified: false` and carries the uid, gid and pid
/// alone. Otherwise the pidfd is kept for as long as the connection lasts, so that each request
/// can ask whether the process is still the one that connected (`ConnectedPeer.current`).
public enum PeerCredentials {
    /// The peer of `descriptor`; nil when the socket has no peer credentials.
    /// `askingTheSocket` false skips `SO_PEERPIDFD` and opens the pidfd as on a kernel without
    /// it (the suite runs both ways on one kernel).
    public static func identify(_ descriptor: Int32, askingTheSocket: Bool = true) -> ConnectedPeer? {
        let acceptedAtTicks = bootTimeTicks()
        var credentials = portal_token_peer_credentials()
        guard portal_token_read_peer_credentials(descriptor, &credentials) == 0 else { return nil }
        let identity = CallerIdentity(
            uid: credentials.uid, gid: credentials.gid, pid: credentials.pid, pidVerified: false,
            sameUserNamespace: nil)
        let unverified = ConnectedPeer(identity)
        guard credentials.pid > 0 else { return unverified }

        var pidfd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        let fromSocket =
            askingTheSocket && getsockopt(descriptor, SOL_SOCKET, portal_token_so_peerpidfd, &pidfd, &length) == 0
        if !fromSocket { pidfd = pidfd_open(credentials.pid, 0) }
        guard pidfd >= 0 else { return unverified }

        let proc = "/proc/\(credentials.pid)"
        guard let startedAt = startTime(proc),
            // With a pidfd opened after the accept, a process that started later is not the caller.
            fromSocket || startedAt <= acceptedAtTicks
        else {
            _ = close(pidfd)
            return unverified
        }

        var details = identity
        details.sameUserNamespace = sameUserNamespace(proc)
        details.userNamespace = FileReading.link(proc + "/ns/user").flatMap(namespaceInode)
        details.cgroup = cgroupPath(proc)
        details.executable = FileReading.link(proc + "/exe")
        details.hasFlatpakInfo = hasFlatpakInfo(proc)
        details.pidVerified = true

        let peer = ConnectedPeer(details, pidfd: pidfd, startedAt: startedAt)
        // The pid still names the process that connected.
        return peer.current().processChange == nil ? peer : unverified
    }

    /// The clock `/proc/PID/stat`'s start time counts from (boot, in clock ticks).
    static func bootTimeTicks() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let ticks = UInt64(sysconf(Int32(_SC_CLK_TCK)))
        return UInt64(now.tv_sec) * ticks + UInt64(now.tv_nsec) * ticks / 1_000_000_000
    }

    /// Field 22 of `/proc/PID/stat`, read after the command name (which may hold spaces and `)`).
    static func startTime(_ proc: String) -> UInt64? {
        guard let bytes = try? FileReading.contents(of: proc + "/stat", limit: 4096),
            let close = bytes.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        // Fields after the name start at 3 (state); 22 is the 20th of them.
        guard fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    /// Whether the caller is in the agent's user namespace: by the namespace's identity when
    /// the agent may read the link, else by comparing the two ID maps as the agent sees them
    /// (a process that forbids dumps, such as portal-token itself, hides the link but not the map).
    static func sameUserNamespace(_ proc: String) -> Bool? {
        if let theirs = FileReading.link(proc + "/ns/user"), let ours = FileReading.link("/proc/self/ns/user") {
            return theirs == ours
        }
        guard let theirs = try? FileReading.contents(of: proc + "/uid_map", limit: 65_536),
            let ours = try? FileReading.contents(of: "/proc/self/uid_map", limit: 65_536),
            let theirGroups = try? FileReading.contents(of: proc + "/gid_map", limit: 65_536),
            let ourGroups = try? FileReading.contents(of: "/proc/self/gid_map", limit: 65_536)
        else { return nil }
        return theirs == ours && theirGroups == ourGroups
    }

    /// The inode number in a namespace link's text, `user:[4026531837]`.
    static func namespaceInode(_ text: String) -> UInt64? {
        guard let open = text.firstIndex(of: "["), let close = text.lastIndex(of: "]"), open < close else { return nil }
        return UInt64(text[text.index(after: open)..<close])
    }

    /// The unified hierarchy's line of `/proc/PID/cgroup` (`0::PATH`).
    static func cgroupPath(_ proc: String) -> String? {
        guard let bytes = try? FileReading.contents(of: proc + "/cgroup", limit: 65_536) else { return nil }
        for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("0::".utf8)) {
            return String(decoding: line.dropFirst(3), as: UTF8.self)
        }
        return nil
    }

    /// Whether the caller's root directory, when it is not the agent's, holds a `/.flatpak-info`
    /// (read through `/proc/PID/root`). What the file says is the sandbox's own word, so none of
    /// it is read.
    static func hasFlatpakInfo(_ proc: String) -> Bool {
        var theirs = stat(), ours = stat(), info = stat()
        guard stat(proc + "/root", &theirs) == 0, stat("/", &ours) == 0,
            theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino
        else { return false }
        return stat(proc + "/root/.flatpak-info", &info) == 0
    }

}

/// A connected peer: what the kernel said of it at the accept, and, when it was verified, its
/// process held by a pidfd for as long as the connection lasts.
public final class ConnectedPeer: @unchecked Sendable {
    /// The identity read at the accept.
    public let identity: CallerIdentity
    private let pidfd: Int32
    private let startedAt: UInt64

    init(_ identity: CallerIdentity, pidfd: Int32 = -1, startedAt: UInt64 = 0) {
        self.identity = identity
        self.pidfd = pidfd
        self.startedAt = startedAt
    }

    deinit {
        if pidfd >= 0 { _ = close(pidfd) }
    }

    /// The identity for a request arriving now: the one read at the accept, with
    /// `processChange` set when the process that connected has ended (the pidfd reports its
    /// exit, or the pid now names a process started at another time) or its executable is no
    /// longer the one it had at the accept (it has exec'd: the start time stays).
    public func current() -> CallerIdentity {
        guard pidfd >= 0 else { return identity }
        var identity = self.identity
        let proc = "/proc/\(identity.pid)"
        var exited = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        if poll(&exited, 1, 0) != 0 || portal_token_pidfd_alive(pidfd) == 0
            || PeerCredentials.startTime(proc) != startedAt
        {
            identity.processChange = .ended
        } else if FileReading.link(proc + "/exe") != identity.executable {
            identity.processChange = .executed
        }
        return identity
    }
}
