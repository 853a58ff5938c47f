/// Who is on the other end of an agent connection, as the kernel tells it (docs/agent.md, "Who
/// is asking"): never what the client says about itself. The agent fills it when it accepts a
/// connection and checks the process again at each request; the rules decide on it, and it
/// names the caller in the agent's log.
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
    /// Whether the caller's root directory, other than the agent's, holds a `/.flatpak-info`. The
    /// sandbox wrote that file itself, so it names no app; it only makes the caller a sandbox.
    public var hasFlatpakInfo: Bool
    /// What became of the process that connected by the time of the request, when it is no
    /// longer the one the agent accepted.
    public var processChange: ProcessChange?

    /// The connecting process, looked at again when a request arrives.
    public enum ProcessChange: Sendable, Equatable {
        /// It has ended (another process holding the descriptor speaks).
        case ended
        /// Its executable is no longer the one it ran at the accept.
        case executed
    }

    public init(
        uid: UInt32, gid: UInt32, pid: Int32, pidVerified: Bool = true, sameUserNamespace: Bool? = true,
        cgroup: String? = nil, executable: String? = nil, hasFlatpakInfo: Bool = false
    ) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.pidVerified = pidVerified
        self.sameUserNamespace = sameUserNamespace
        self.cgroup = cgroup
        self.executable = executable
        self.hasFlatpakInfo = hasFlatpakInfo
    }

    /// What the cgroup path says.
    public var placement: CgroupPlacement { CgroupPlacement(path: cgroup) }

    /// The Flatpak app ID, from the `app-flatpak-ID-N.scope` unit systemd made for the app.
    public var flatpakAppID: String? { placement.flatpakAppID }

    /// Whether the caller runs in a container or sandbox (Docker, Podman, containerd, Kubernetes,
    /// Flatpak, LXC or a systemd-nspawn machine, or a root of its own with a `/.flatpak-info`).
    public var isContained: Bool { placement.isContained || hasFlatpakInfo }

    /// Why no rule may serve this caller, when none may: the process that connected is gone or
    /// runs another program, or its cgroup is ambiguous.
    public var distrust: String? {
        switch processChange {
        case .ended?: return "the process that connected has ended"
        case .executed?:
            return "the process that connected has run another program since the agent accepted the connection"
        case nil: return pidVerified ? placement.ambiguity : nil
        }
    }

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
        if hasFlatpakInfo { parts.append("own root with /.flatpak-info") }
        if let unit = placement.systemdUnit { parts.append("unit \(unit)") }
        if placement.ambiguity != nil { parts.append("cgroup ambiguous") }
        if let executable { parts.append("exe \(executable)") }
        return parts.joined(separator: ", ")
    }
}

/// What a cgroup v2 path tells about where a process runs (docs/agent.md, "Who is asking"). Only
/// the cgroup that systemd or a container engine made counts: systemd's layout is `*.slice`
/// components, then one unit (`NAME.service`, `NAME.scope`); below the user's manager
/// (`user@UID.service`) slices and one unit follow again. Everything below that unit is
/// delegated to it (a rootless engine, a `Delegate=yes` service) and names nothing: the
/// process that holds the unit chose those names. The unit may be a container's or a
/// sandbox's: `docker-ID.scope` (Docker), `libpod-ID.scope` (Podman), `cri-containerd-ID.scope`
/// and `crio-ID.scope` (containerd, CRI-O, Kubernetes), `app-flatpak-APPID-N.scope` (Flatpak),
/// `machine.slice/NAME.scope` (systemd-nspawn and libvirt). The engines' own layouts take their
/// fixed places: `/docker/ID`, `/kubepods/QOS/PODUID/ID` (or `/kubepods/PODUID/ID`),
/// `/lxc.payload.NAME`, `/lxc/NAME`. A container or sandbox named again below the one that
/// decides, or where none decides, makes the placement ambiguous.
public struct CgroupPlacement: Sendable, Equatable {
    /// The container's ID (64 hex digits for Docker and Podman).
    public var containerID: String?
    /// `docker`, `podman`, `containerd`, `cri-o`, `kubernetes`, `lxc` or `machine`.
    public var runtime: String?
    public var flatpakAppID: String?
    /// The systemd unit that holds the process: a `.service` or `.scope` systemd made.
    public var systemdUnit: String?
    /// The path down to the cgroup that decided (the unit, or the engine's container cgroup); the
    /// whole path when nothing did.
    public var identityPath: String?
    /// Why the placement cannot be told, when it cannot: the agent then refuses the caller.
    public var ambiguity: String?

    public init(path: String?) {
        guard let path else { return }
        identityPath = path
        let components = path.split(separator: "/").map(String.init)
        let decidingIndex = decide(components)
        if let decidingIndex {
            identityPath = "/" + components[...decidingIndex].joined(separator: "/")
        }
        let below = components[((decidingIndex ?? -1) + 1)...]
        if below.enumerated().contains(where: { offset, component in
            Self.namesContainer(component, next: below.dropFirst(offset + 1).first)
        }) {
            ambiguity =
                decidingIndex == nil
                ? "the caller's cgroup names a container or sandbox no engine or systemd placed"
                : "the caller's cgroup names a container or sandbox below the unit or container that holds it"
        }
    }

    public var isContained: Bool { containerID != nil || flatpakAppID != nil }

    /// Reads the engines' layouts and systemd's; returns the index of the deciding component.
    private mutating func decide(_ components: [String]) -> Int? {
        guard let first = components.first else { return nil }
        if first == "docker" || first == "lxc", components.count > 1 {
            (containerID, runtime) = (components[1], first)
            return 1
        }
        if let name = Self.strip(first, prefix: "lxc.payload.", suffix: "") {
            (containerID, runtime) = (name, "lxc")
            return 0
        }
        if first == "kubepods" {
            let index = components.count > 1 && ["besteffort", "burstable"].contains(components[1]) ? 3 : 2
            guard index < components.count else { return nil }
            (containerID, runtime) = (components[index], "kubernetes")
            return index
        }
        var index = 0
        var underManager = false
        while true {
            while index < components.count, components[index].hasSuffix(".slice") { index += 1 }
            guard index < components.count, Self.isUnit(components[index]) else { return nil }
            let unit = components[index]
            // user@UID.service is the user's manager, which holds every user unit: not a unit of its own here.
            if !underManager, unit.hasPrefix("user@"), unit.hasSuffix(".service") {
                underManager = true
                index += 1
                continue
            }
            systemdUnit = unit
            if let (id, engine) = Self.containerUnit(unit) {
                (containerID, runtime) = (id, engine)
            } else if let app = Self.flatpakUnit(unit) {
                flatpakAppID = app
            } else if components.first == "machine.slice", index == 1, unit.hasSuffix(".scope") {
                (containerID, runtime) = (unit, "machine")
            }
            return index
        }
    }

    private static func isUnit(_ component: String) -> Bool {
        component.hasSuffix(".service") || component.hasSuffix(".scope")
    }

    /// A container engine's scope: its ID and the engine.
    private static func containerUnit(_ component: String) -> (String, String)? {
        for (prefix, engine) in [
            ("docker-", "docker"), ("libpod-conmon-", "podman"), ("libpod-", "podman"),
            ("cri-containerd-", "containerd"), ("crio-", "cri-o"),
        ] {
            if let id = strip(component, prefix: prefix, suffix: ".scope") { return (id, engine) }
        }
        return nil
    }

    /// `app-flatpak-org.example.App-12345.scope`: the app ID, then a number.
    private static func flatpakUnit(_ component: String) -> String? {
        guard let app = strip(component, prefix: "app-flatpak-", suffix: ".scope"), let dash = app.lastIndex(of: "-"),
            dash > app.startIndex, app[app.index(after: dash)...].allSatisfy(\.isNumber)
        else { return nil }
        return String(app[..<dash])
    }

    /// Whether a component would name a container or sandbox wherever it stood.
    private static func namesContainer(_ component: String, next: String?) -> Bool {
        containerUnit(component) != nil || flatpakUnit(component) != nil || component.hasPrefix("lxc.payload.")
            || (["docker", "lxc", "kubepods"].contains(component) && next != nil)
    }

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
