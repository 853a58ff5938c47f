/// The user's answers to the agent's questions (docs/agent.md, "Asking the user"), kept for the
/// caller they were given for: approvals and refusals apart, each until its rule's idle time
/// passes without a request it covers, and at most its rule's cap after it was given. Pure: the
/// time comes in, in milliseconds of a clock that counts suspended time too.
public struct ConsentMemory: Sendable {
    public enum Answer: String, Sendable, Equatable {
        case allow
        case deny
    }

    /// What an answer is kept for: one `ask` line of one rule, as it reads (its text and the
    /// rule's `remember`, so an edited line or time asks again, and the time is the key's), for
    /// one caller.
    public struct Key: Hashable, Sendable {
        public var ask: AgentRules.Ask
        public var caller: String

        public init(_ ask: AgentRules.Ask, caller: String) {
            self.ask = ask
            self.caller = caller
        }
    }

    private struct Kept: Sendable {
        var given: Int64
        var lastUsed: Int64

        func stands(at now: Int64, for key: Key) -> Bool {
            now - lastUsed < key.ask.remember.idleSeconds * 1000 && now - given < key.ask.remember.capSeconds * 1000
        }
    }

    private var approvals: [Key: Kept] = [:]
    private var refusals: [Key: Kept] = [:]

    public init() {}

    /// The answer that stands for `key` at `now`, which counts as a use of it; an answer past its
    /// idle time or its cap is dropped.
    public mutating func answer(for key: Key, at now: Int64) -> Answer? {
        for (answer, stands) in [
            (Answer.deny, refusals[key]?.stands(at: now, for: key)),
            (.allow, approvals[key]?.stands(at: now, for: key)),
        ] {
            guard let stands else { continue }
            if stands {
                if answer == .deny { refusals[key]?.lastUsed = now } else { approvals[key]?.lastUsed = now }
                return answer
            }
            if answer == .deny { refusals[key] = nil } else { approvals[key] = nil }
        }
        return nil
    }

    /// Keeps the user's answer for `key`, in place of any other; one its rule keeps for no time
    /// (`remember 0s 0s`) is not kept.
    public mutating func record(_ answer: Answer, for key: Key, at now: Int64) {
        // What no longer stands goes, so that callers made anew (each `docker run`) leave nothing.
        approvals = approvals.filter { $0.key != key && $0.value.stands(at: now, for: $0.key) }
        refusals = refusals.filter { $0.key != key && $0.value.stands(at: now, for: $0.key) }
        guard key.ask.remember.idleSeconds > 0 else { return }
        let kept = Kept(given: now, lastUsed: now)
        if answer == .allow { approvals[key] = kept } else { refusals[key] = kept }
    }

    /// Drops every answer; how many approvals and refusals there were.
    public mutating func forget() -> (approvals: Int, refusals: Int) {
        defer {
            approvals = [:]
            refusals = [:]
        }
        return (approvals.count, refusals.count)
    }

    /// How many answers stand at `now`.
    public func count(at now: Int64) -> (approvals: Int, refusals: Int) {
        (
            approvals.filter { $0.value.stands(at: now, for: $0.key) }.count,
            refusals.filter { $0.value.stands(at: now, for: $0.key) }.count
        )
    }

    /// The caller as an answer is kept for, as the kernel tells it: its uid and user namespace,
    /// the container, systemd unit and Flatpak app that hold it (`group`), its root mount (from
    /// `/proc/PID/mountinfo`, which anyone may read: a sandbox that shares the rest still has
    /// mounts of its own), and its executable with the SHA-256 of its contents. Where the kernel
    /// hides the executable (a process that forbids core dumps, as portal-token does, seen by an
    /// agent without CAP_SYS_PTRACE over it), the key says so and holds the rest; where the
    /// contents were not read (`executableDigest` nil: a network or FUSE file system, a file
    /// past the size read), it names the path alone. Nil when the process could not be tied to
    /// the connection or its mounts read: no answer is asked or kept for such a caller.
    public static func callerKey(_ caller: CallerIdentity, executableDigest: String?, rootMount: String?)
        -> String?
    {
        guard caller.pidVerified, caller.distrust == nil, let rootMount else { return nil }
        let executable =
            caller.executable.map { path in
                "exe \(path) " + (executableDigest.map { "sha256 \($0)" } ?? "(contents not read)")
            } ?? "exe hidden by the kernel"
        let namespace = "user-namespace inode " + (caller.userNamespace.map { String($0) } ?? "unknown")
        return [group(of: caller), namespace, "root mount " + rootMount, executable].joined(separator: "\n")
    }

    /// The part of the caller's key that a sandbox cannot make anew by copying a program,
    /// mounting or making a user namespace: uid, same or other user namespace, container, unit
    /// and Flatpak app. Open questions are bounded per group.
    public static func group(of caller: CallerIdentity) -> String {
        let placement = caller.placement
        // Same or other, not which: a sandbox makes a new user namespace at will.
        let namespace = caller.sameUserNamespace.map { $0 ? "same" : "other" } ?? "unknown"
        return [
            "uid \(caller.uid)", "user-namespace " + namespace,
            "container " + (placement.containerID.map { (placement.runtime ?? "") + ":" + $0 } ?? "none"),
            "unit " + (placement.systemdUnit ?? "none"),
            "flatpak " + (placement.flatpakAppID ?? (caller.hasFlatpakInfo ? "unnamed" : "none")),
        ].joined(separator: "\n")
    }

    /// A process's root mount in `/proc/PID/mountinfo`'s text: the last mount on `/` as the
    /// process sees it, by its mount ID, device and root; nil when there is none.
    public static func rootMount(inMountInfo text: String) -> String? {
        var found: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5)
            guard fields.count >= 5, fields[4] == "/" else { continue }
            found = "\(fields[0]) \(fields[2]) \(fields[3])"
        }
        return found
    }
}

/// What became of a question put on the desktop (`org.freedesktop.Notifications`).
public enum DesktopQuestionOutcome: Sendable, Equatable {
    /// The user chose an action.
    case answered(ConsentMemory.Answer)
    /// The user closed the notification without an answer, or it expired.
    case dismissed
    /// It was answered another way first (the terminal route), or the bound passed.
    case ended
    /// No notification could be shown (no session bus, no notification server): why.
    case unavailable(String)
}
