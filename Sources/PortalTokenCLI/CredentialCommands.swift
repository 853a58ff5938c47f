import PortalTokenCore

/// What the three credential-protocol operations share: reading the request from stdin.
private func readRequest(_ context: Context) throws -> CredentialRequest {
    var bytes = context.streams.readRequest()
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
        guard let credential = try helper(context).get(request) else { return }
        var output = try CredentialProtocol.format(credential)
        context.streams.write(output, to: context.streams.output)
        zeroize(&output)
    }

    private func runScriptMode(_ context: Context) throws {
        throw CLIError("not signed in", hint: "sign in with 'portal-token login'", exitCode: .notSignedIn)
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
        try helper(context).store(request)
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
        try helper(context).erase(request)
    }
}
