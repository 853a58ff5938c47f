import Operations
import PortalTokenCore

struct ListCommand: Command {
    static let name = "list"
    static let summary = "List stored credentials and Portal sessions (never a password or token)"
    static let details = """
        Shows what the backend in use holds, and no other store: each generic
        credential's protocol, host, path and username, and every stored Portal
        session (auth environment, end user and expires-at), whichever environment is
        configured. Never a password, token or other secret. No network call: a
        session is listed as stored, not judged (status says whether it is still
        usable). Control characters in stored text are shown escaped; with nothing
        stored, it prints "nothing is stored". Exit status 0, even when empty.

        With --format json, prints {"credentials":[{"host","path","protocol",
        "username"}],"sessions":[{"authEnvironmentId","endUserId","expiresAt"}]}.
        """

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        // In client mode the report is the agent's, rendered here as a local run renders its own.
        let report =
            try context.agent().map { agent in
                let response = try agent.call("GET", "/v1/list")
                guard response.status == 200, let report = try? JSONValue.parse(response.body) else {
                    try agent.fail(response)
                }
                return report
            } ?? List.run(context)
        context.streams.print(json ? report.serialized : Self.text(report))
    }

    /// The report as lines for a terminal, stored text escaped.
    static func text(_ report: JSONValue) -> String {
        let credentials = report["credentials"]?.arrayValue ?? []
        let sessions = report["sessions"]?.arrayValue ?? []
        guard !credentials.isEmpty || !sessions.isEmpty else { return "nothing is stored" }
        let field = { (item: JSONValue, name: String) in TerminalText.escaped(item[name]?.stringValue ?? "") }
        var lines: [String] = credentials.map { credential in
            let url = DockerCredentials.url(
                protocolName: credential["protocol"]?.stringValue ?? "", host: credential["host"]?.stringValue,
                path: credential["path"]?.stringValue)
            return "credential  \(TerminalText.escaped(url))  \(field(credential, "username"))"
        }
        lines += sessions.map { session in
            let expiry = session["expiresAt"]?.stringValue.map { TerminalText.escaped($0) } ?? "unknown"
            return """
                session     environment \(field(session, "authEnvironmentId"))  end user \
                \(field(session, "endUserId"))  expires at \(expiry)
                """
        }
        return lines.joined(separator: "\n")
    }
}
