import Basics
import Glibc
import Operations
import PortalTokenCore

/// The Docker credential-helper protocol (docker-credential-helpers), spoken when the binary is
/// started as `docker-credential-portal-token`: Docker, Podman, Buildah and skopeo run it with
/// one operation word and the request on stdin (docs/git-credential.md, "The Docker credential-helper protocol").
/// Credentials live in the same generic store as git's, keyed by protocol, host and path as git's `url=` splits them.
///
/// Its conventions are Docker's, not git's: errors are one line on **stdout** with exit 1
/// (clients read it from there), and a missing credential is exactly
/// "credentials not found in native keychain".
enum DockerCredentialHelper {
    static let programName = "docker-credential-portal-token"
    static let maximumInputBytes = 64 * 1024

    /// Runs one operation with the process's environment (read before the passphrase variable
    /// was removed from it); returns the exit status.
    static func main(
        _ arguments: [String], streams: StandardStreams, environment: [String: String], services: Services
    ) -> Int32 {
        let invocation = PortalTokenCLI.Invocation()
        do {
            try run(arguments, streams: streams, environment: environment, services: services, invocation: invocation)
            invocation.context?.recordAudit(error: nil, exitCode: 0)
            return 0
        } catch let exit as SilentExit {
            return exit.code.rawValue
        } catch let failure as DockerCredentials.Failure {
            invocation.context?.recordAudit(error: failure, exitCode: 1)
            streams.print(failure.message)
        } catch {
            invocation.context?.recordAudit(error: error, exitCode: 1)
            // Store and setting errors: their message, on the one line Docker shows, whatever
            // it quotes (docs/security.md, "Hardening rules").
            streams.print(TerminalText.escaped(CLIError(error).message))
        }
        return 1
    }

    static func run(
        _ arguments: [String], streams: StandardStreams, environment: [String: String], services: Services,
        invocation: PortalTokenCLI.Invocation
    ) throws {
        guard arguments.count == 1, let operation = arguments.first else {
            throw DockerCredentials.Failure(message: "Usage: \(programName) <store|get|erase|list|version>")
        }
        if operation == "version" {
            streams.print("\(programName) (portal-token) \(Release.version)")
            return
        }
        guard ["get", "store", "erase", "list"].contains(operation) else {
            throw DockerCredentials.Failure(message: "Usage: \(programName) <store|get|erase|list|version>")
        }
        let settings = try Settings.load(flags: [:], environment: environment)
        try settings.checkValues()
        let context = Context(
            streams: streams, environment: environment, settings: settings, programName: programName,
            services: services)
        context.audit = DockerCredentials.auditOperations[operation].map(AuditDraft.init)
        invocation.context = context
        var input = operation == "list" ? [] : streams.readAll(limit: maximumInputBytes)
        defer { zeroize(&input) }
        guard input.count <= maximumInputBytes else {
            throw DockerCredentials.Failure(message: "the request on stdin is too large")
        }
        if let agent = try context.agent() {
            // Client mode (docs/agent.md, "Client mode"): the agent runs this helper and answers
            // with what it printed, in Docker's conventions already.
            let response = try agent.call("POST", "/v1/docker/" + operation, body: input)
            guard let code = agent.exitCode(response) else { try agent.fail(response) }
            var body = response.body
            streams.write(body, to: streams.output)
            zeroize(&body)
            if code != .success { throw SilentExit(code: code) }
            return
        }
        var output = try DockerCredentials.run(operation, input: input, context)
        streams.write(output, to: streams.output)
        zeroize(&output)
    }
}
