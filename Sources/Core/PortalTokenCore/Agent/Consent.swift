/// The user's answers to the agent's questions (docs/agent.md, "Asking the user"), kept for the
/// caller they were given for: approvals and refusals apart, each until its rule's idle time
/// passes without a request it covers, and at most its rule's cap after it was given. Pure: the
/// time comes in, in milliseconds of a clock that counts suspended time too.
public struct ConsentMemory: Sendable {
    public enum Answer: String, Sendable, Equatable {
        case allow
        case deny
    }

    /// What an answer is kept for: one `ask` line of one rule, for one caller as the kernel
    /// names it (`ConsentMemory.callerKey`).
    public struct Key: Hashable, Sendable {
        public var rule: String
        public var index: Int
        public var caller: String

        public init(rule: String, index: Int, caller: String) {
            self.rule = rule
            self.index = index
            self.caller = caller
        }
    }

    private struct Kept: Sendable {
        var given: Int64
        var lastUsed: Int64
        var remember: AgentRules.Remember

        func stands(at now: Int64) -> Bool {
            now - lastUsed < remember.idleSeconds * 1000 && now - given < remember.capSeconds * 1000
        }
    }

    private var approvals: [Key: Kept] = [:]
    private var refusals: [Key: Kept] = [:]

    public init() {}

    /// The answer that stands for `key` at `now`, which counts as a use of it; an answer past its
    /// idle time or its cap is dropped.
    public mutating func answer(for key: Key, at now: Int64) -> Answer? {
        for (answer, stands) in [
            (Answer.deny, refusals[key]?.stands(at: now)), (.allow, approvals[key]?.stands(at: now)),
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
    public mutating func record(_ answer: Answer, for key: Key, remember: AgentRules.Remember, at now: Int64) {
        approvals[key] = nil
        refusals[key] = nil
        guard remember.idleSeconds > 0 else { return }
        let kept = Kept(given: now, lastUsed: now, remember: remember)
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
        (approvals.values.filter { $0.stands(at: now) }.count, refusals.values.filter { $0.stands(at: now) }.count)
    }

    /// The caller as an answer is kept for: its uid, user and mount namespaces, the container,
    /// systemd unit and Flatpak app that hold it, and its executable with the SHA-256 of its
    /// contents, all as the kernel tells them (a sandbox that shares the rest still has a mount
    /// namespace of its own). Nil when the process could not be tied to the connection or read:
    /// no answer is kept for, or asked of, a caller that cannot be named.
    public static func callerKey(_ caller: CallerIdentity, executableDigest: String?, mountNamespace: String?)
        -> String?
    {
        guard caller.pidVerified, caller.distrust == nil, let executable = caller.executable,
            let executableDigest, let mountNamespace
        else { return nil }
        let placement = caller.placement
        var fields = ["uid \(caller.uid)"]
        fields.append("user-namespace " + (caller.userNamespace.map { String($0) } ?? "unknown"))
        fields.append("mount-namespace " + mountNamespace)
        fields.append("container " + (placement.containerID.map { (placement.runtime ?? "") + ":" + $0 } ?? "none"))
        fields.append("unit " + (placement.systemdUnit ?? "none"))
        fields.append("flatpak " + (placement.flatpakAppID ?? (caller.hasFlatpakInfo ? "unnamed" : "none")))
        fields.append("exe \(executable) sha256 \(executableDigest)")
        return fields.joined(separator: "\n")
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
