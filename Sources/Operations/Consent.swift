import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// The agent's questions to its user (docs/agent.md, "Asking the user"): a request a rule's `ask`
/// line covers waits while the user is asked, on the desktop and through `portal-token approve`,
/// at most `boundMilliseconds`; the answer is kept for the caller as the kernel names it. One
/// question per caller and line, however many of its requests wait on it.
package final class ConsentBroker: Sendable {
    /// A question waiting for its answer, as `approve` lists it: nothing in it is secret.
    package struct Question: Sendable {
        package var id: String
        /// The caller as the kernel names it (`CallerIdentity`'s description).
        package var caller: String
        /// What it asks for.
        package var operation: String
        /// The rule and the `ask` line that ask.
        package var rule: String
        package var grant: String
        package var remember: AgentRules.Remember
        /// When it is refused unanswered, on the monotonic clock, in milliseconds.
        package var deadline: Int64

        package func json(now: Int64) -> JSONValue {
            .object([
                "id": .string(id), "caller": .string(caller), "operation": .string(operation), "rule": .string(rule),
                "grant": .string(grant), "idleSeconds": .int(remember.idleSeconds),
                "capSeconds": .int(remember.capSeconds), "secondsLeft": .int(max(0, deadline - now) / 1000),
            ])
        }

        package init?(json: JSONValue) {
            guard let id = json["id"]?.stringValue, let caller = json["caller"]?.stringValue,
                let operation = json["operation"]?.stringValue, let rule = json["rule"]?.stringValue,
                let grant = json["grant"]?.stringValue, let idle = json["idleSeconds"]?.int64Value,
                let cap = json["capSeconds"]?.int64Value, let left = json["secondsLeft"]?.int64Value
            else { return nil }
            self.init(
                id: id, caller: caller, operation: operation, rule: rule, grant: grant,
                remember: AgentRules.Remember(idleSeconds: idle, capSeconds: cap),
                deadline: MonotonicClock.milliseconds() + left * 1000)
        }

        package init(
            id: String, caller: String, operation: String, rule: String, grant: String,
            remember: AgentRules.Remember, deadline: Int64
        ) {
            self.id = id
            self.caller = caller
            self.operation = operation
            self.rule = rule
            self.grant = grant
            self.remember = remember
            self.deadline = deadline
        }
    }

    /// How a request that asked came out.
    package enum Outcome: Equatable {
        /// Approved: now, or by an answer kept from before.
        case approved(remembered: Bool)
        /// Refused by the user: now, or by a refusal kept from before.
        case denied(remembered: Bool)
        /// No answer within the bound: refused, and nothing kept.
        case unanswered
        /// The caller cannot be named well enough to keep an answer for it: refused unasked.
        case unnamed
        /// Too many questions wait already (`maximumOpenQuestions` in all, `maximumOpenPerGroup`
        /// of the caller's group), or too many requests on this one: refused unasked.
        case tooMany(String)
    }

    /// The most questions open at once, in all and for one group of callers (one uid, user
    /// namespace, container, unit and Flatpak app: `ConsentMemory.group`), and the most requests
    /// that wait on one question.
    package static let maximumOpenQuestions = 16
    package static let maximumOpenPerGroup = 4
    package static let maximumWaiters = 32

    /// The caller's root mount (`ConsentMemory.rootMount`), from `/proc/PID/mountinfo`.
    private static func rootMount(of pid: Int32) -> String? {
        guard pid > 0, let bytes = try? FileReading.contents(of: "/proc/\(pid)/mountinfo", limit: 4 << 20) else {
            return nil
        }
        return ConsentMemory.rootMount(inMountInfo: String(decoding: bytes, as: UTF8.self))
    }

    /// The default bound on a question: about what a person needs to notice and answer it.
    package static let defaultBoundMilliseconds = 30_000

    /// A question asked: its answer once given. Read and written under `state`'s lock only.
    private final class Asked: @unchecked Sendable {
        let question: Question
        let key: ConsentMemory.Key
        let group: String
        var answer: ConsentMemory.Answer?
        /// The requests that wait on it.
        var waiters = 1

        init(_ question: Question, key: ConsentMemory.Key, group: String) {
            self.question = question
            self.key = key
            self.group = group
        }
    }

    private struct State {
        var memory = ConsentMemory()
        /// The open question of each caller and line.
        var open: [ConsentMemory.Key: Asked] = [:]
        var byID: [String: Asked] = [:]

        mutating func close(_ asked: Asked) {
            if open[asked.key] === asked { open[asked.key] = nil }
            byID[asked.question.id] = nil
        }
    }

    private let state = Mutex(State())
    private let digests = ExecutableDigests()
    package let boundMilliseconds: Int
    /// Puts a question on the desktop and waits for it (Services' `askOnDesktop`).
    private let desktop: DesktopAsking
    private let log: @Sendable (String) -> Void
    /// Milliseconds on a clock that counts suspended time: kept answers age while a laptop sleeps.
    private let now: @Sendable () -> Int64

    package init(
        boundMilliseconds: Int, desktop: @escaping DesktopAsking, log: @escaping @Sendable (String) -> Void,
        now: @escaping @Sendable () -> Int64 = ConsentBroker.bootClockMilliseconds
    ) {
        self.boundMilliseconds = boundMilliseconds
        self.desktop = desktop
        self.log = log
        self.now = now
    }

    package static func bootClockMilliseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// Asks, or answers from what is kept, whether `caller` may have what `ask` covers.
    /// `waiting` is called once, when the request is to wait for a person.
    package func ask(
        _ ask: AgentRules.Ask, operation: AgentRules.Operation, caller: CallerIdentity, waiting: () -> Void
    ) -> Outcome {
        guard
            let name = ConsentMemory.callerKey(
                caller, executableDigest: digests.digest(of: caller.pid), rootMount: Self.rootMount(of: caller.pid))
        else { return .unnamed }
        let key = ConsentMemory.Key(ask, caller: name)
        let group = ConsentMemory.group(of: caller)
        let now = now()
        enum Step {
            case kept(ConsentMemory.Answer)
            case wait(Asked, new: Bool)
            case refused(String)
        }
        let step = state.withLock { state -> Step in
            if let kept = state.memory.answer(for: key, at: now) { return .kept(kept) }
            if let open = state.open[key] {
                guard open.waiters < Self.maximumWaiters else {
                    return .refused("\(Self.maximumWaiters) requests already wait on this caller's question")
                }
                open.waiters += 1
                return .wait(open, new: false)
            }
            // Callers that make themselves new (a copy of a program, a mount namespace each time)
            // can neither flood the desktop nor crowd other callers' questions out.
            guard state.byID.count < Self.maximumOpenQuestions else {
                return .refused("\(Self.maximumOpenQuestions) questions already wait for the user's answer")
            }
            guard state.byID.values.filter({ $0.group == group }).count < Self.maximumOpenPerGroup else {
                return .refused("\(Self.maximumOpenPerGroup) questions of callers like this one already wait")
            }
            let question = Question(
                id: Self.newID(), caller: caller.description, operation: String(operation.description.prefix(300)),
                rule: ask.rule, grant: ask.grant, remember: ask.remember,
                deadline: MonotonicClock.milliseconds() + Int64(boundMilliseconds))
            let asked = Asked(question, key: key, group: group)
            state.open[key] = asked
            state.byID[question.id] = asked
            return .wait(asked, new: true)
        }
        let asked: Asked
        let new: Bool
        switch step {
        case .kept(let kept): return kept == .allow ? .approved(remembered: true) : .denied(remembered: true)
        case .refused(let why): return .tooMany(why)
        case .wait(let waited, let isNew): (asked, new) = (waited, isNew)
        }
        waiting()
        if new {
            log(
                "portal-token agent: asking the user (question \(asked.question.id), rule \(ask.rule), "
                    + "'\(ask.grant)') whether \(asked.question.caller) may have \(asked.question.operation)")
            putOnDesktop(asked)
        }
        return wait(for: asked)
    }

    /// Shows the question on the desktop and takes its answer there, unless the terminal route
    /// answers first: the request that asked drives it, the others wait on the state.
    private func putOnDesktop(_ asked: Asked) {
        let question = asked.question
        let summary = Self.plain("Allow \(question.operation)?")
        // A yes covers the whole line, for this caller: the body says which.
        let body = Self.plain(
            "\(question.caller) asks the portal-token agent for \(question.operation). A yes allows what rule "
                + "\(question.rule)'s '\(question.grant)' covers, to this caller, for "
                + "\(Self.duration(question.remember.idleSeconds)) idle and "
                + "\(Self.duration(question.remember.capSeconds)) at most. Question \(question.id), which "
                + "'portal-token approve' answers too.")
        let outcome = desktop(summary, body, question.deadline) { [self] in
            state.withLock { $0.byID[question.id] != nil }
        }
        switch outcome {
        case .answered(let answer): _ = self.answer(question.id, answer, by: "the desktop notification")
        case .unavailable(let why):
            log(
                "portal-token agent: question \(question.id) is not on the desktop (\(why)); "
                    + "'portal-token approve' answers it")
        case .dismissed, .ended: break
        }
    }

    /// Waits until the question is answered or its deadline passes, when it is taken away with
    /// nothing kept.
    private func wait(for asked: Asked) -> Outcome {
        while true {
            let past = MonotonicClock.milliseconds() >= asked.question.deadline
            let answer = state.withLock { state -> ConsentMemory.Answer?? in
                if let answer = asked.answer { return .some(answer) }
                guard past else { return nil }
                state.close(asked)
                return .some(nil)
            }
            switch answer {
            case .some(.allow?): return .approved(remembered: false)
            case .some(.deny?): return .denied(remembered: false)
            case .some(nil): return .unanswered
            case nil: usleep(20_000)
            }
        }
    }

    /// Answers the open question `id`; false when there is none (answered, or past its bound).
    /// `by` names the route in the agent's log.
    package func answer(_ id: String, _ answer: ConsentMemory.Answer, by route: String) -> Bool {
        let now = now()
        let answered = state.withLock { state -> Question? in
            guard let asked = state.byID[id], asked.answer == nil,
                MonotonicClock.milliseconds() < asked.question.deadline
            else { return nil }
            asked.answer = answer
            state.close(asked)
            state.memory.record(answer, for: asked.key, at: now)
            return asked.question
        }
        guard let answered else { return false }
        log(
            "portal-token agent: question \(id) answered '\(answer.rawValue)' by \(route), kept for rule "
                + "\(answered.rule) and this caller for \(Self.duration(answered.remember.idleSeconds)) idle")
        return true
    }

    /// The questions waiting for an answer, the oldest first.
    package var pending: [Question] {
        let moment = MonotonicClock.milliseconds()
        return state.withLock { state in
            state.byID.values.map(\.question).filter { $0.deadline > moment }.sorted { $0.deadline < $1.deadline }
        }
    }

    /// "1 approval and 2 refusals": what `forget` dropped, as the log and `agent --forget` say it.
    package static func counted(_ forgotten: (approvals: Int, refusals: Int)) -> String {
        "\(forgotten.approvals) approval\(forgotten.approvals == 1 ? "" : "s") and \(forgotten.refusals) "
            + "refusal\(forgotten.refusals == 1 ? "" : "s")"
    }

    /// Drops every kept answer; how many approvals and refusals stood.
    package func forget() -> (approvals: Int, refusals: Int) {
        let now = now()
        return state.withLock { state in
            let standing = state.memory.count(at: now)
            _ = state.memory.forget()
            return standing
        }
    }

    /// Text for a notification: no control character, and none of the markup a notification
    /// server may read in a body (`&`, `<`, `>`), since a caller's host or path is in it.
    static func plain(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    switch scalar {
                    case "&": return "+"
                    case "<": return "("
                    case ">": return ")"
                    default: return scalar.properties.generalCategory == .control ? "?" : scalar
                    }
                }))
    }

    /// A question's id: short, random, not secret (only the agent's own user may answer).
    private static func newID() -> String {
        "q" + Hex.encode(Sodium.randomBytes(4))
    }

    /// `90s`, `10m`, `12h`, `7d`: a duration as the rules file writes it.
    package static func duration(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0, seconds > 0 { return "\(seconds / 86_400)d" }
        if seconds % 3600 == 0, seconds > 0 { return "\(seconds / 3600)h" }
        if seconds % 60 == 0, seconds > 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }
}

/// Puts a question on the desktop until `deadline` (monotonic milliseconds) or until `open`
/// says it was answered elsewhere: the summary, the body, and what became of it.
public typealias DesktopAsking =
    @Sendable (_ summary: String, _ body: String, _ deadline: Int64, _ open: @escaping () -> Bool)
    -> DesktopQuestionOutcome

/// The SHA-256 of a process's executable, read through `/proc/PID/exe` (the file the process
/// runs, even if its path was replaced since), kept by the file's device, inode, size and times
/// so that a program is read once, however often it asks.
final class ExecutableDigests: Sendable {
    private let known = Mutex<[FileVersion: String]>([:])
    /// The most digests kept: a program per entry.
    static let capacity = 256
    /// The largest executable read: past it, the key names the path alone.
    static let maximumBytes = 256 << 20

    /// Whether the file is on a file system whose reads answer from this machine: a FUSE,
    /// network or 9p file system can hold a read for as long as its server likes, and tell the
    /// times it likes, so its files are named by their path alone.
    private static func isLocal(_ descriptor: Int32) -> Bool {
        // fstatfs(2), found by name: Swift's Glibc module declares neither it nor `struct statfs`,
        // whose first member on Linux is the file system's type, a C long.
        typealias FileSystemStatus = @convention(c) (Int32, UnsafeMutableRawPointer?) -> Int32
        guard let symbol = try? DynamicLibrary.process?.function("fstatfs") else { return false }
        let call = unsafeBitCast(symbol, to: FileSystemStatus.self)
        var status = [Int](repeating: 0, count: 32)
        guard status.withUnsafeMutableBytes({ call(descriptor, $0.baseAddress) }) == 0 else { return false }
        let remote: Set<UInt32> = [
            0x6573_5546, 0x6969, 0xFF53_4D42, 0xFE53_4D42, 0x0102_1997, 0x5346_414F, 0x0BD0_0BD0,
        ]
        return !remote.contains(UInt32(truncatingIfNeeded: status[0]))
    }

    func digest(of pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        let descriptor = open("/proc/\(pid)/exe", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
            status.st_size <= Self.maximumBytes, Self.isLocal(descriptor)
        else { return nil }
        let key = FileVersion(status)
        if let digest = known.withLock({ $0[key] }) { return digest }
        guard
            let digest = Sodium.sha256(streaming: { buffer in
                while true {
                    let count = read(descriptor, buffer.baseAddress, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    return count
                }
            })
        else { return nil }
        let text = Hex.encode(digest)
        known.withLock { known in
            if known.count >= Self.capacity { known.removeAll() }
            known[key] = text
        }
        return text
    }
}

/// `portal-token approve` and `agent --forget`: the agent's questions and kept answers, asked of
/// the agent on `socketPath` (`agent --forget --socket`), else on `PORTAL_TOKEN_AGENT_SOCK` (or
/// `--agent-socket`), else on this user's main socket.
package enum Consent {
    package static func agent(_ context: Context, socketPath: String?) throws -> AgentConnection {
        if socketPath == nil, let agent = try context.agent() { return agent }
        guard
            let path = socketPath ?? AgentConnection.defaultSocketPath("agent.sock", environment: context.environment)
        else {
            throw CLIError.usage(
                "no agent to ask: XDG_RUNTIME_DIR is not set", hint: "give --agent-socket PATH, or set XDG_RUNTIME_DIR")
        }
        return AgentConnection(
            socketPath: path,
            timeoutMilliseconds: try context.settings.milliseconds(
                .agentTimeout, default: AgentConnection.defaultTimeoutMilliseconds),
            streams: context.streams, services: context.services)
    }

    /// The questions that wait, the oldest first.
    package static func pending(_ agent: AgentConnection) throws -> [ConsentBroker.Question] {
        let response = try agent.call("GET", "/v1/consent")
        guard response.status == 200 else { try agent.fail(response) }
        guard let questions = (try? JSONValue.parse(response.body))?["questions"]?.arrayValue else {
            throw CLIError("the agent on \(agent.socketPath) gave no list of questions", exitCode: .storage)
        }
        return questions.compactMap(ConsentBroker.Question.init(json:))
    }

    /// Answers question `id`; false when it no longer waits.
    package static func answer(_ id: String, _ answer: ConsentMemory.Answer, _ agent: AgentConnection) throws -> Bool {
        let body = JSONValue.object(["id": .string(id), "answer": .string(answer.rawValue)]).serialized
        let response = try agent.call("POST", "/v1/consent/answer", body: Array(body.utf8))
        if response.status == 404 { return false }
        guard response.status == 200 else { try agent.fail(response) }
        return true
    }

    /// Drops every answer the agent keeps; how many approvals and refusals stood.
    package static func forget(_ agent: AgentConnection) throws -> (approvals: Int, refusals: Int) {
        let response = try agent.call("POST", "/v1/consent/forget")
        guard response.status == 200, let object = try? JSONValue.parse(response.body) else { try agent.fail(response) }
        return (Int(object["approvals"]?.int64Value ?? 0), Int(object["refusals"]?.int64Value ?? 0))
    }
}
