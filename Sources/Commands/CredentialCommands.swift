import PortalTokenCore

/// What the three credential-protocol operations share: reading the request from stdin. Its URL
/// is what git's `credential.<url>.interactive` applies to (Prompting.swift). In client mode
/// (docs/agent.md, "Client mode") the request, once read and found well-formed, goes to the
/// agent as it came, and `forwarded` says the agent has answered it.
private func readRequest(_ context: Context, forwardingTo endpoint: String? = nil) throws -> (
    request: CredentialRequest, forwarded: Bool
) {
    var bytes = try context.streams.readRequest()
    defer { zeroize(&bytes) }
    let request = try CredentialProtocol.parse(bytes)
    context.promptURL = PromptRules.credentialURL(request)
    context.audit?.describe(request)
    // A get with no attribute is script mode, which asks the agent for the session itself.
    if let endpoint, let agent = try context.agent(), request.hasAttributes || endpoint != "/v1/git/get" {
        try agent.relay(try agent.call("POST", endpoint, body: bytes))
        return (request, true)
    }
    return (request, false)
}

private func helper(_ context: Context) throws -> CredentialHelper {
    CredentialHelper(store: try context.credentials(), now: context.now)
}

private let protocolDetails = """
    Reads git's credential protocol on stdin: key=value lines, ended by a blank
    line or EOF (see gitcredentials(7)). Unknown keys are ignored.
    """

struct GetCommand: Command {
    static let name = "get"
    static let auditOperation: AuditOperation? = .get
    static let summary = "Print the stored credential that matches the request on stdin"
    static let details =
        protocolDetails + """


            Prints username, password, and password_expiry_utc / oauth_refresh_token when
            stored; prints nothing when no credential matches. A credential whose
            password_expiry_utc has passed is never printed. Without a username, the most
            recently stored match is printed.

            git 2.46+: a request with capability[]=authtype also gets authtype and
            credential when stored (a Portal host: authtype=Bearer, credential=<token>,
            ephemeral=1 instead of a password); one with capability[]=state gets
            state[]=portal-token:served.

            Script mode: when stdin is a terminal or carries no attribute at all
            (portal-token get </dev/null), prints the signed-in session's token alone.
            Scripts should use 'portal-token token', which never reads stdin.
            """

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        if context.streams.inputIsTerminal { return try runScriptMode(context) }
        let (request, forwarded) = try readRequest(context, forwardingTo: "/v1/git/get")
        if forwarded { return }
        if !request.hasAttributes { return try runScriptMode(context) }
        guard var output = try Self.answer(to: request, context) else { return }
        context.streams.write(output, to: context.streams.output)
        zeroize(&output)
    }

    /// The operation, for this command and the agent's `POST /v1/git/get`: the answer's lines,
    /// nil when nothing matches.
    static func answer(to request: CredentialRequest, _ context: Context) throws -> [UInt8]? {
        let answer: CredentialProtocol.Answer?
        if try context.isPortalOrigin(request) {
            answer = try portalAnswer(for: request, context)
        } else {
            context.audit?.concernsPortalSession = false
            let helper = try helper(context)
            answer = try helper.get(request).map { helper.answer($0, to: request) }
        }
        guard let answer else {
            context.audit?.outcome = .notFound
            return nil
        }
        return try CredentialProtocol.format(answer)
    }

    /// A Portal origin is answered from the session (docs/sessions.md, "Portal origins in the credential protocol"): to
    /// a client that advertises `capability[]=authtype`, the token as an ephemeral Bearer credential; to any
    /// other, username is the end user and password the token. password_expiry_utc is the
    /// sliding expiry either way. Not signed in reads as "no credential", as git expects of a
    /// helper.
    private static func portalAnswer(for request: CredentialRequest, _ context: Context) throws
        -> CredentialProtocol.Answer?
    {
        // A username in the request (`credential.<url>.username`) names which end user's session.
        let username = request.username.flatMap { $0.isEmpty ? nil : $0 }
        let session: PortalSession
        do {
            session = try context.sessionService(endUserID: username).usableSession()
        } catch SessionError.notSignedIn {
            return nil
        }
        if let username, username != session.endUserID { return nil }
        var answer = CredentialProtocol.Answer(
            credential: Credential(
                protocolName: request.protocolName ?? "https", host: request.host, username: session.endUserID,
                password: session.token, passwordExpiresAt: session.expiresAt,
                authType: "Bearer", credential: session.token))
        if request.advertisesAuthType {
            answer.authType = true
            answer.ephemeral = true
            answer.omitPassword = true
        }
        return answer
    }

    /// `TOKEN=$(portal-token get)`: what `token` prints, for scripts written before it existed.
    private func runScriptMode(_ context: Context) throws {
        let session = try context.usableSession()
        SessionOutput.printToken(session, json: json, context)
    }
}

struct StoreCommand: Command {
    static let name = "store"
    static let auditOperation: AuditOperation? = .store
    static let summary = "Store the credential given on stdin"
    static let details =
        protocolDetails + """


            Needs protocol, host (or path), username and password; replaces the credential
            stored for the same protocol, host, path and username. password_expiry_utc and
            oauth_refresh_token are kept with it. With capability[]=authtype, authtype and
            credential are kept too (a username and password are then optional). A
            credential marked ephemeral=1 is never stored.
            """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let (request, forwarded) = try readRequest(context, forwardingTo: "/v1/git/store")
        if !forwarded { try Self.perform(request, context) }
    }

    /// The operation, for this command and the agent's `POST /v1/git/store`.
    static func perform(_ request: CredentialRequest, _ context: Context) throws {
        guard try context.isPortalOrigin(request) else {
            context.audit?.concernsPortalSession = false
            try helper(context).store(request)
            return
        }
        // git's "approve" for a Portal origin: the same token slides the expiry (ephemeral or
        // not); a new token (minted by the user's own backend) becomes the session, unless it
        // is marked ephemeral, which is never stored. The token is the password, or git
        // 2.46+'s `credential`.
        guard let token = request.passwordOrCredential, !token.isEmpty else { return }
        let endUserID = request.username?.trimmingWhitespace ?? ""
        // The end user named is the session approved (a second end user's is kept beside the first).
        let sessions = try context.sessionService(endUserID: endUserID.isEmpty ? nil : endUserID)
        if !endUserID.isEmpty, !request.isEphemeral {
            try sessions.approve(token: token, endUserID: endUserID)
            if let session = try sessions.restore(), session.token == token { context.rememberAccount(session) }
            return
        }
        if let session = try sessions.restore(), session.token == token {
            return try sessions.approve(token: token, endUserID: session.endUserID)
        }
        if request.isEphemeral { return }
        throw CLIError.usage(
            "a Portal session needs its end user ID as the username",
            hint: "give username=<endUserId> with the token")
    }
}

struct EraseCommand: Command {
    static let name = "erase"
    static let auditOperation: AuditOperation? = .erase
    static let summary = "Remove the stored credentials that match the request on stdin"
    static let details =
        protocolDetails + """


            Removes every match. With a password (or credential) in the request, removes
            only entries whose stored password (or credential) equals it. A pattern with no
            protocol, host, path or username removes nothing.
            """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let (request, forwarded) = try readRequest(context, forwardingTo: "/v1/git/erase")
        if !forwarded { try Self.perform(request, context) }
    }

    /// The operation, for this command and the agent's `POST /v1/git/erase`.
    static func perform(_ request: CredentialRequest, _ context: Context) throws {
        guard try context.isPortalOrigin(request) else {
            context.audit?.concernsPortalSession = false
            if try helper(context).erase(request) == 0 { context.audit?.outcome = .notFound }
            return
        }
        let username = request.username.flatMap { $0.isEmpty ? nil : $0 }
        let sessions = try context.sessionService(endUserID: username)
        if let token = request.passwordOrCredential {
            // git sends the password (or git 2.46+'s credential) it just saw rejected: the
            // session ended (hook, exit 3). Another value is an older token, and changes nothing.
            if let ended = try sessions.invalidate(token: token) {
                context.audit?.outcome = .invalidated
                throw SessionError.ended(reason: .unauthorized, endUserID: ended.endUserID)
            }
            context.audit?.outcome = .notFound
        } else if try !sessions.remove() {
            context.audit?.outcome = .notFound
        }
    }
}

struct CapabilityCommand: Command {
    static let name = "capability"
    static let summary = "List the credential-protocol capabilities portal-token supports"
    static let details = """
        git 2.46+'s capability query (git credential capability): prints version 0,
        then one "capability NAME" line per capability: authtype (authtype, credential
        and ephemeral are understood) and state (state[] is understood). Reads nothing.
        """

    /// Every capability portal-token understands, in the order they are listed.
    static let capabilities = ["authtype", "state"]

    init(arguments: ParsedArguments) throws(CLIError) {}

    /// What it prints, which the agent's `POST /v1/git/capability` answers too.
    static var text: String { (["version 0"] + capabilities.map { "capability \($0)" }).joined(separator: "\n") + "\n" }

    func run(in context: Context) throws { context.streams.write(Array(Self.text.utf8), to: context.streams.output) }
}
