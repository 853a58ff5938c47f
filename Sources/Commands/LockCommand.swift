import PortalTokenCore

struct LockCommand: Command {
    static let name = "lock"
    static let summary = "Drop every cached key and session copy at once, the agent's too"
    static let details = """
        Drops every entry portal-token keeps in the kernel keyring (the user's persistent
        keyring, named portal-token:…): the encrypted file store's cached keys, the Portal session's
        copies and sign-in results kept in memory, for every store and environment of this
        user. A running agent drops the ones it keeps too: in client mode
        (PORTAL_TOKEN_AGENT_SOCK) only the agent's, as a store or erase would be judged; else the
        agent listening on $XDG_RUNTIME_DIR/portal-token/agent.sock, if its socket is there.
        Nothing stored is changed: the next command reads the store again, so the encrypted file
        asks for its passphrase. It does not lock the desktop keyring; lock that with the desktop
        (or the screen lock). The caches also empty themselves: key-cache-timeout seconds after
        their last use, key-cache-max seconds at most.
        """

    /// How long a local `lock` waits for an agent it found: the agent answers from memory.
    static let agentTimeoutMilliseconds = 2000

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        // Client mode: the keys are the agent's, in its keyring or its memory (docs/agent.md,
        // "Where the keys are kept").
        if let agent = context.agent() {
            try agent.relay(try agent.call("POST", "/v1/lock"))
            return
        }
        context.services.secretCache().dropAll(withPrefix: SecretCacheNames.prefix)
        let agentToo = dropAgentKeys(context)
        context.streams.printError(
            "portal-token: dropped every cached key and session copy\(agentToo ? ", the agent's too" : ""); "
                + "the next command reads the store again")
    }

    /// Asks the agent of this user's runtime directory, if its socket is there, to drop the keys
    /// it may hold in its own memory; true when it did. An agent that is not running, or does
    /// not answer in time, is passed over: what this process could drop is dropped.
    private func dropAgentKeys(_ context: Context) -> Bool {
        guard let path = AgentCommand.defaultSocketPath("agent.sock", environment: context.environment),
            context.services.fileExists(path)
        else { return false }
        let response = try? context.services.agentExchange(
            path, HTTPRequest(method: "POST", url: "/v1/lock", body: nil), Self.agentTimeoutMilliseconds)
        return response?.status == 200
    }
}
