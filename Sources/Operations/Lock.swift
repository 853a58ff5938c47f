import Basics
import PortalTokenCore

/// `lock` and the agent's `POST /v1/lock`: every key and session copy dropped from the kernel
/// keyring (or the agent's memory), so that the next run reads the store again.
package enum Lock {
    /// Who dropped them: the agent this run goes through (client mode), or this process, with
    /// whether this user's agent dropped its own too.
    package enum Outcome {
        case agent(socketPath: String)
        case here(agentToo: Bool)
    }

    /// How long a local `lock` waits for an agent it found: the agent answers from memory.
    static let agentTimeoutMilliseconds = 2000

    package static func run(_ context: Context) throws -> Outcome {
        // Client mode: the keys are the agent's, in its keyring or its memory (docs/agent.md,
        // "Where the keys are kept").
        if let agent = try context.agent() {
            let response = try agent.call("POST", "/v1/lock")
            guard response.status == 200 else { try agent.fail(response) }
            return .agent(socketPath: agent.socketPath)
        }
        dropHere(context)
        return .here(agentToo: dropAgentKeys(context))
    }

    /// The drop itself, in this process: what the agent does for `POST /v1/lock`.
    package static func dropHere(_ context: Context) {
        context.services.secretCache().dropAll(withPrefix: SecretCacheNames.prefix)
    }

    /// Asks the agent of this user's runtime directory, if its socket is there, to drop the keys
    /// it may hold in its own memory; true when it did. An agent that is not running, or does
    /// not answer in time, is passed over: what this process could drop is dropped.
    private static func dropAgentKeys(_ context: Context) -> Bool {
        guard let path = AgentConnection.defaultSocketPath("agent.sock", environment: context.environment),
            context.services.fileExists(path)
        else { return false }
        let response = try? context.services.agentExchange(
            path, HTTPRequest(method: "POST", url: "/v1/lock", body: nil), agentTimeoutMilliseconds)
        return response?.status == 200
    }
}
