import PortalTokenCore

/// What the three credential-protocol operations share: reading the request from stdin.
private func readRequest(_ context: Context) throws -> CredentialRequest {
    var bytes = try context.streams.readRequest()
    defer { zeroize(&bytes) }
    return try CredentialProtocol.parse(bytes)
}

private func helper(_ context: Context) throws -> CredentialHelper {
    CredentialHelper(store: try context.credentialStore(), now: context.now)
}

private let protocolDetails = """
    Reads git's credential protocol on stdin: key=value lines, ended by a blank
    line or EOF (see gitcredentials(7)). Unknown keys are ignored.
    """

struct GetCommand: Command {
    static let name = "get"
    static let summary = "Print the stored credential that matches the request on stdin"
    static let usage = "portal-token get [--format json] < request"
    static let details = protocolDetails + """


        Prints username, password, and password_expiry_utc / oauth_refresh_token when
        stored; prints nothing when no credential matches. A credential whose
        password_expiry_utc has passed is never printed. Without a username, the most
        recently stored match is printed.

        Script mode: when stdin is a terminal or carries no attribute at all
        (portal-token get </dev/null), prints the signed-in session's token alone.
        """

    let format: String?

    init(arguments: inout ArgumentReader) throws(CLIError) {
        format = try arguments.option("format")
        if let format, format != "json" { throw .usage("--format must be json") }
    }

    func run(in context: Context) throws {
        if context.streams.inputIsTerminal { return try runScriptMode(context) }
        let request = try readRequest(context)
        if !request.hasAttributes { return try runScriptMode(context) }
        let credential: Credential?
        if try context.isPortalOrigin(request) {
            credential = try portalCredential(for: request, context)
        } else {
            credential = try helper(context).get(request)
        }
        guard let credential else { return }
        var output = try CredentialProtocol.format(credential)
        context.streams.write(output, to: context.streams.output)
        zeroize(&output)
    }

    /// A Portal origin is answered from the session (product contract §5): username is the end
    /// user, password the token, password_expiry_utc the sliding expiry. Not signed in reads as
    /// "no credential", as git expects of a helper.
    private func portalCredential(for request: CredentialRequest, _ context: Context) throws -> Credential? {
        let session: PortalSession
        do {
            session = try Composition.sessionService(for: context).usableSession()
        } catch SessionError.notSignedIn {
            return nil
        }
        if let username = request.username, username != session.endUserID { return nil }
        return Credential(protocolName: request.protocolName ?? "https", host: request.host, username: session.endUserID,
                          password: session.token, passwordExpiresAt: session.expiresAt)
    }

    /// `TOKEN=$(portal-token get)`: the token alone, or the JSON object of product contract §3.
    private func runScriptMode(_ context: Context) throws {
        let session = try Composition.sessionService(for: context).usableSession()
        var text: String
        if format == "json" {
            var members: [String: JSONValue] = [
                "token": .string(session.token.text),
                "endUserId": .string(session.endUserID),
                "authEnvironmentId": .string(session.authEnvironmentID),
            ]
            members["expiresAt"] = session.expiresAt.map { .string(RFC3339.format($0)) } ?? .null
            text = JSONValue.object(members).serialized + "\n"
        } else {
            text = session.token.text + "\n"
        }
        var bytes = Array(text.utf8)
        context.streams.write(bytes, to: context.streams.output)
        zeroize(&bytes)
        text = ""
    }
}

struct StoreCommand: Command {
    static let name = "store"
    static let summary = "Store the credential given on stdin"
    static let usage = "portal-token store < credential"
    static let details = protocolDetails + """


        Needs protocol, host (or path), username and password; replaces the credential
        stored for the same protocol, host, path and username. password_expiry_utc and
        oauth_refresh_token are kept with it.
        """

    init(arguments: inout ArgumentReader) throws(CLIError) {}

    func run(in context: Context) throws {
        let request = try readRequest(context)
        guard try context.isPortalOrigin(request) else {
            try helper(context).store(request)
            return
        }
        // git's "approve" for a Portal origin: the same token slides the expiry; a new token
        // (minted by the user's own backend) becomes the session.
        guard let token = request.password, !token.isEmpty else { return }
        guard let endUserID = request.username?.trimmingWhitespace, !endUserID.isEmpty else {
            throw CLIError.usage("a Portal session needs its end user ID as the username",
                                 hint: "give username=<endUserId> with the token")
        }
        try Composition.sessionService(for: context).approve(token: token, endUserID: endUserID)
    }
}

struct EraseCommand: Command {
    static let name = "erase"
    static let summary = "Remove the stored credentials that match the request on stdin"
    static let usage = "portal-token erase < pattern"
    static let details = protocolDetails + """


        Removes every match. With a password in the request, removes only entries whose
        stored password equals it. A pattern with no protocol, host, path or username
        removes nothing.
        """

    init(arguments: inout ArgumentReader) throws(CLIError) {}

    func run(in context: Context) throws {
        let request = try readRequest(context)
        guard try context.isPortalOrigin(request) else {
            try helper(context).erase(request)
            return
        }
        let sessions = try Composition.sessionService(for: context)
        if let password = request.password {
            // git sends the password it just saw rejected: the session ended (hook, exit 3).
            // Another password is an older token, and changes nothing.
            if let ended = try sessions.invalidate(token: password) {
                throw SessionError.ended(reason: .unauthorized, endUserID: ended.endUserID)
            }
        } else {
            try sessions.remove()
        }
    }
}
