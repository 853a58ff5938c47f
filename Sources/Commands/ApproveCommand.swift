import Basics
import Glibc
import Operations
import PortalTokenCore

struct ApproveCommand: Command {
    static let name = "approve"
    static let summary = "Answer the agent's questions from a terminal: list them, allow or deny one"
    static let details = """
        A rule of the agent's rules file that asks (ask token ENV, ask git-get HOST,
        ask proxy …) holds a caller's request while the agent asks its user: on the
        desktop, with a notification that has Allow and Deny, and here, for machines
        without a desktop or over ssh. Unanswered within ask-timeout-ms (30000) the
        request is refused (403, "not approved") and nothing is kept.

        With no ID it lists the questions that wait (id, caller as the kernel names it,
        what it asks, the rule, and how long the answer would be kept); on a terminal
        it then asks about each in turn: a allows, d denies, Enter leaves it. With an
        ID it allows that question, or denies it with --deny. An answer is kept for
        that caller (its uid, user namespace, root mount, container, unit, Flatpak
        app, and its executable with the SHA-256 of its contents) for the rule's idle
        time and cap (remember IDLE CAP; 10m and 12h unless the rule says);
        portal-token agent --forget drops every kept answer.

        Only the agent's own user, on its main socket and outside any sandbox, may see
        or answer its questions. It asks the agent on PORTAL_TOKEN_AGENT_SOCK (or
        --agent-socket), else $XDG_RUNTIME_DIR/portal-token/agent.sock. Exit 0; 1 when
        the question no longer waits (answered, or past its time); 4 when the agent
        cannot be reached or refuses.
        """

    let id: String?
    let deny: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        id = arguments.operands.first
        deny = arguments.has(.deny)
        if deny && id == nil { throw .usage("--deny needs the ID of the question to deny") }
        if let id, !(id.utf8.count == 9 && id.hasPrefix("q") && id.dropFirst().allSatisfy(\.isHexDigit)) {
            throw .usage(
                "'\(id.prefix(40))' is not a question's ID (q and 8 hex digits, as 'portal-token approve' lists them)")
        }
    }

    func run(in context: Context) throws {
        let agent = try Consent.agent(context, socketPath: nil)
        let streams = context.streams
        if let id {
            guard try Consent.answer(id, deny ? .deny : .allow, agent) else {
                streams.printError("portal-token: question \(id) no longer waits: it was answered, or its time passed")
                throw SilentExit(code: .notSignedIn)
            }
            streams.printError("portal-token: question \(id): \(deny ? "denied" : "allowed")")
            return
        }
        let questions = try Consent.pending(agent)
        guard !questions.isEmpty else {
            streams.print("No question waits for an answer.")
            return
        }
        let interactive = streams.inputIsTerminal
        for question in questions {
            // What the caller chose (a host, a path) is shown with its control characters escaped.
            streams.print(TerminalText.escaped("\(question.id): \(question.caller)"))
            streams.print(
                TerminalText.escaped("  asks for \(question.operation) (rule \(question.rule), '\(question.grant)')"))
            streams.print(
                "  an answer is kept for this caller \(ConsentBroker.duration(question.remember.idleSeconds)) idle, "
                    + "\(ConsentBroker.duration(question.remember.capSeconds)) at most; "
                    + "\(max(0, question.deadline - MonotonicClock.milliseconds()) / 1000) s left to answer")
            guard interactive else { continue }
            streams.write(Array("  [a]llow, [d]eny, Enter to leave it: ".utf8), to: streams.output)
            let reply = String(decoding: streams.readLine(limit: 16), as: UTF8.self).trimmingWhitespace.lowercased()
            guard
                let answer: ConsentMemory.Answer = ["a", "allow"].contains(reply)
                    ? .allow : ["d", "deny"].contains(reply) ? .deny : nil
            else {
                streams.print("  left unanswered")
                continue
            }
            let taken = try Consent.answer(question.id, answer, agent)
            streams.print(taken ? "  \(answer == .allow ? "allowed" : "denied")" : "  no longer waits")
        }
        if !interactive {
            streams.print("Answer one with 'portal-token approve ID' or 'portal-token approve --deny ID'.")
        }
    }
}
