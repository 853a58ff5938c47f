import PortalTokenCore

struct ListCommand: Command {
    static let name = "list"
    static let summary = "List stored credentials and Portal sessions (never a password or token)"
    static let details = """
        Shows what the backend in use holds: each generic credential's protocol, host, path
        and username, and every stored Portal session (auth environment, end user and
        expires-at), whichever environment is configured. Never a password, token or other
        secret. Exit 0, even when empty.
        --format json prints {"credentials":[{"protocol","host","path","username"}],
        "sessions":[{"authEnvironmentId","endUserId","expiresAt"}]}.
        """

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        if let agent = try context.agent() {
            return try agent.relay(try agent.call("GET", "/v1/list" + (json ? "?format=json" : "")))
        }
        let credentials = try context.credentials().all()
        // Every stored Portal session, one per auth environment, as stored: no network call
        // and no expiry judgement (that is `status`'s).
        let sessions = try SessionItems.all(in: context.items(context.backendChoice().backend))
            .sorted { $0.authEnvironmentID < $1.authEnvironmentID }
        if json {
            let credentialObjects: [JSONValue] = credentials.map { credential in
                var members: [String: JSONValue] = [
                    "protocol": .string(credential.protocolName),
                    "username": .string(credential.username),
                ]
                members["host"] = credential.host.map { .string($0.gitHost) } ?? .null
                members["path"] = credential.path.map { .string($0) } ?? .null
                return .object(members)
            }
            let sessionObjects: [JSONValue] = sessions.map { session in
                .object([
                    "authEnvironmentId": .string(session.authEnvironmentID),
                    "endUserId": .string(session.endUserID),
                    "expiresAt": session.expiresAt.map { .string(RFC3339.format($0)) } ?? .null,
                ])
            }
            context.streams.print(
                JSONValue.object(["credentials": .array(credentialObjects), "sessions": .array(sessionObjects)])
                    .serialized)
            return
        }
        if credentials.isEmpty && sessions.isEmpty {
            context.streams.print("nothing is stored")
            return
        }
        for credential in credentials {
            context.streams.print(
                """
                credential  \(Self.shown(DockerCredentialHelper.url(of: credential)))  \
                \(Self.shown(credential.username))
                """
            )
        }
        for session in sessions {
            let expiry = session.expiresAt.map(RFC3339.format) ?? "unknown"
            context.streams.print(
                """
                session     environment \(Self.shown(session.authEnvironmentID))  end user \
                \(Self.shown(session.endUserID))  expires at \(expiry)
                """
            )
        }
    }

    /// Stored text as it may reach a terminal: control characters escaped.
    static func shown(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7f || (0x80...0x9f).contains(scalar.value) {
                result += "\\x" + String(scalar.value, radix: 16, uppercase: false).leftPadded(to: 2)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
