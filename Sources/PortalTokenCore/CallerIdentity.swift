/// Who is on the other end of an agent connection, as the kernel tells it (docs/agent.md, "Who
/// is asking"): never what the client says about itself. The agent fills it when it accepts a
/// connection; the rules decide on it, and it names the caller in the agent's log.
public struct CallerIdentity: Sendable, Equatable, CustomStringConvertible {
    /// From `SO_PEERCRED`, as seen from the agent's namespaces: a client in a user namespace of
    /// its own that believes it is uid 0 is its real uid here, and its pid is the host pid.
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// Whether the pid was tied to the process that connected: a pidfd taken from the socket
    /// (or opened right after the accept) stayed valid while its details were read, and the
    /// process started before the connection was accepted. When false, nothing below was
    /// trusted and the fields are nil.
    public var pidVerified: Bool
    /// The caller's user namespace compared with the agent's; nil when it could not be told.
    public var sameUserNamespace: Bool?
    /// The inode number of the caller's user namespace, when the agent may read its link.
    public var userNamespace: UInt64?
    /// `/proc/PID/cgroup`'s unified (v2) path.
    public var cgroup: String?
    /// `/proc/PID/exe`, when the agent may read it.
    public var executable: String?
    /// The app ID in the caller's `/.flatpak-info`, when it has one.
    public var flatpakInfoAppID: String?

    public init(
        uid: UInt32, gid: UInt32, pid: Int32, pidVerified: Bool = true, sameUserNamespace: Bool? = true,
        cgroup: String? = nil, executable: String? = nil, flatpakInfoAppID: String? = nil
    ) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.pidVerified = pidVerified
        self.sameUserNamespace = sameUserNamespace
        self.cgroup = cgroup
        self.executable = executable
        self.flatpakInfoAppID = flatpakInfoAppID
    }

    /// What the cgroup path says.
    public var placement: CgroupPlacement { CgroupPlacement(path: cgroup) }

    /// The Flatpak app ID, from `/.flatpak-info` or else the cgroup's `app-flatpak-ID-N.scope`.
    public var flatpakAppID: String? { flatpakInfoAppID ?? placement.flatpakAppID }

    /// Whether the caller runs in a container or sandbox (Docker, Podman, containerd, Kubernetes,
    /// Flatpak, LXC or a systemd-nspawn machine).
    public var isContained: Bool { placement.isContained || flatpakInfoAppID != nil }

    /// One line for the log: every field the kernel gave, none of them secret.
    public var description: String {
        var parts = ["uid \(uid)", "gid \(gid)", "pid \(pid)"]
        if !pidVerified { parts.append("pid unverified") }
        switch sameUserNamespace {
        case true?: parts.append("user namespace same")
        case false?: parts.append("user namespace other")
        case nil: parts.append("user namespace unknown")
        }
        let placement = self.placement
        if let container = placement.containerID {
            parts.append("container \(placement.runtime ?? "?"):\(container.prefix(12))")
        }
        if let app = flatpakAppID { parts.append("flatpak \(app)") }
        if let unit = placement.systemdUnit { parts.append("unit \(unit)") }
        if let executable { parts.append("exe \(executable)") }
        return parts.joined(separator: ", ")
    }
}

/// What a cgroup v2 path tells about where a process runs. Container engines and systemd name
/// their cgroups in known ways: `docker-ID.scope` or `/docker/ID` (Docker), `libpod-ID.scope`
/// (Podman), `cri-containerd-ID.scope` and `/kubepods…` (containerd, Kubernetes),
/// `app-flatpak-APPID-N.scope` (Flatpak), `/lxc.payload.NAME` (LXC), `/machine.slice/…`
/// (systemd-nspawn and libvirt).
public struct CgroupPlacement: Sendable, Equatable {
    /// The container's ID (64 hex digits for Docker and Podman).
    public var containerID: String?
    /// `docker`, `podman`, `containerd`, `kubernetes`, `lxc` or `machine`.
    public var runtime: String?
    public var flatpakAppID: String?
    /// The innermost systemd unit: a `.service` or `.scope`.
    public var systemdUnit: String?

    public init(path: String?) {
        guard let path else { return }
        let components = path.split(separator: "/").map(String.init)
        for component in components {
            if let id = Self.strip(component, prefix: "docker-", suffix: ".scope") {
                (containerID, runtime) = (id, "docker")
            } else if let id = Self.strip(component, prefix: "libpod-conmon-", suffix: ".scope") {
                (containerID, runtime) = (id, "podman")
            } else if let id = Self.strip(component, prefix: "libpod-", suffix: ".scope") {
                (containerID, runtime) = (id, "podman")
            } else if let id = Self.strip(component, prefix: "cri-containerd-", suffix: ".scope") {
                (containerID, runtime) = (id, "containerd")
            } else if let id = Self.strip(component, prefix: "crio-", suffix: ".scope") {
                (containerID, runtime) = (id, "cri-o")
            } else if let name = Self.strip(component, prefix: "lxc.payload.", suffix: "") {
                (containerID, runtime) = (name, "lxc")
            } else if let app = Self.strip(component, prefix: "app-flatpak-", suffix: ".scope") {
                // app-flatpak-org.example.App-12345.scope: the app ID, then a number.
                if let dash = app.lastIndex(of: "-"), app[app.index(after: dash)...].allSatisfy(\.isNumber) {
                    flatpakAppID = String(app[..<dash])
                }
            }
            if component.hasSuffix(".service") || component.hasSuffix(".scope") {
                // user@UID.service is the user's manager, which holds every user unit: not a unit of its own here.
                if !(component.hasPrefix("user@") && component.hasSuffix(".service")) { systemdUnit = component }
            }
        }
        if containerID == nil, let index = components.firstIndex(where: { $0 == "docker" || $0 == "lxc" }),
            index + 1 < components.count
        {
            (containerID, runtime) = (components[index + 1], components[index] == "docker" ? "docker" : "lxc")
        }
        if containerID == nil, components.first.map({ $0.hasPrefix("kubepods") }) == true {
            (containerID, runtime) = (components.last, "kubernetes")
        }
        if containerID == nil, components.first == "machine.slice", components.count > 1 {
            (containerID, runtime) = (components[1], "machine")
        }
    }

    public var isContained: Bool { containerID != nil || flatpakAppID != nil }

    private static func strip(_ text: String, prefix: String, suffix: String) -> String? {
        guard text.hasPrefix(prefix), text.hasSuffix(suffix), text.count > prefix.count + suffix.count else {
            return nil
        }
        return String(text.dropFirst(prefix.count).dropLast(suffix.count))
    }
}

extension AuditCaller {
    /// The caller of a request to the agent, for its audit line (docs/audit.md, "Fields").
    public init(_ identity: CallerIdentity, socket: String) {
        let verified = identity.pidVerified
        let placement = identity.placement
        self.init(
            pid: identity.pid, uid: identity.uid, gid: identity.gid,
            userNamespace: verified ? identity.userNamespace : nil,
            executable: verified ? identity.executable : nil, containerID: verified ? placement.containerID : nil,
            flatpakAppID: verified ? identity.flatpakAppID : nil, systemdUnit: verified ? placement.systemdUnit : nil,
            socket: socket)
    }
}
