import Operations
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

private let protocolDetails = """
    Reads git's credential protocol on stdin: key=value lines, ended by a blank
    line or EOF (see gitcredentials(7)). Unknown keys are ignored. A request for a
    Portal origin concerns the Portal session, not the store: the session of the
    end user its username names, else that of the account in use.
    """

struct GetCommand: Command {
    static let name = "get"
    static let auditOperation: AuditOperation? = .get
    static let summary = "Print the stored credential that matches the request on stdin"
    static let details =
        protocolDetails + """


            Prints the matching credential's username, password, and password_expiry_utc
            and oauth_refresh_token when stored; prints nothing, exit status 0, when no
            credential matches. The request needs a protocol and a host (or path). Without
            a username, the most recently stored match is printed. A credential whose
            password_expiry_utc has passed is never printed.

            git 2.46 and later: a request with capability[]=authtype also gets the stored
            authtype and credential, each capability[] line before the values that depend
            on it; a credential stored with only those is given to such requests alone. A
            stored credential given to a request with capability[]=state also carries
            state[]=portal-token:served.

            A Portal origin gets the end user as username, the token as password and the
            sliding expiry as password_expiry_utc; with capability[]=authtype, it gets
            authtype=Bearer, credential=<token> and ephemeral=1 instead, and no password.
            Not signed in (as the end user named, if any), it gets nothing, exit status 0,
            as git expects of a helper.

            Script mode: when stdin is a terminal or carries no attribute at all (end of
            file or a lone blank line, as in portal-token get </dev/null), prints the
            configured environment's session token alone on one line; with --format json,
            {"authEnvironmentId", "endUserId", "expiresAt", "token"} instead, expiresAt in
            RFC 3339. Exit status 1 when not signed in; 3, 4 and 5 as for token. Scripts
            should use 'portal-token token', which never reads stdin: script mode cannot
            tell a loop's input or a silent open pipe from a credential request.
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
        guard var output = try CredentialGet.run(request, context) else { return }
        context.streams.write(output, to: context.streams.output)
        zeroize(&output)
    }

    /// `TOKEN=$(portal-token get)`: what `token` prints, for scripts written before it existed.
    private func runScriptMode(_ context: Context) throws {
        let session = try context.usableSession()
        TokenOutput.printToken(session, json: json, context)
    }
}

struct StoreCommand: Command {
    static let name = "store"
    static let auditOperation: AuditOperation? = .store
    static let summary = "Store the credential given on stdin"
    static let details =
        protocolDetails + """


            Needs protocol, host (or path), username and password; a request lacking one is
            ignored. Replaces the credential stored for the same protocol, host, path and
            username; password_expiry_utc and oauth_refresh_token are kept with it. With
            capability[]=authtype, authtype and credential are kept too (a username and
            password are then optional). A credential marked ephemeral=1 is never stored.
            When the request carries state[]=portal-token:served and the store already
            holds exactly that credential (the one a get just served), nothing is written.

            For a Portal origin, this is git's approve: the session's token, as password or
            credential, ephemeral or not, slides the session's expiry. Another token (one
            minted by the user's own backend) is adopted as the session of the end user
            the username names, kept beside any other end user's session; marked
            ephemeral=1, it is not adopted, and with no username it is exit status 2.
            """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let (request, forwarded) = try readRequest(context, forwardingTo: "/v1/git/store")
        if !forwarded { try CredentialStore.run(request, context) }
    }

}

struct EraseCommand: Command {
    static let name = "erase"
    static let auditOperation: AuditOperation? = .erase
    static let summary = "Remove the stored credentials that match the request on stdin"
    static let details =
        protocolDetails + """


            Removes every stored credential that matches. With a password (or credential)
            in the request, removes only entries whose stored password (or credential)
            equals it. A pattern with no protocol, host, path or username removes nothing.

            For a Portal origin: with the session's token as password or credential (as
            git sends it after a 401), the session is invalidated: removed, the hook run
            with reason unauthorized, exit status 3. Without a password or credential, the
            session is removed and the hook does not run; with another one, nothing
            changes.
            """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let (request, forwarded) = try readRequest(context, forwardingTo: "/v1/git/erase")
        if !forwarded { try CredentialErase.run(request, context) }
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
