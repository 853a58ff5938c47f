import Basics
import Glibc
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
    static let notFoundMessage = "credentials not found in native keychain"
    static let maximumInputBytes = 64 * 1024
    /// Every failure's exit status, Docker's 1.
    static let failed = ExitCode.notSignedIn

    struct Failure: Error {
        let message: String
        /// Docker's "credentials not found", which its clients read as no credential.
        var isNotFound = false

        static let notFound = Failure(message: notFoundMessage, isNotFound: true)
    }

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
        } catch let failure as Failure {
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

    /// What the audit log calls each operation.
    static let auditOperations: [String: AuditOperation] = [
        "get": .dockerGet, "store": .dockerStore, "erase": .dockerErase, "list": .dockerList,
    ]

    static func run(
        _ arguments: [String], streams: StandardStreams, environment: [String: String], services: Services,
        invocation: PortalTokenCLI.Invocation
    ) throws {
        guard arguments.count == 1, let operation = arguments.first else {
            throw Failure(message: "Usage: \(programName) <store|get|erase|list|version>")
        }
        if operation == "version" {
            streams.print("\(programName) (portal-token) \(PortalTokenCLI.version)")
            return
        }
        guard ["get", "store", "erase", "list"].contains(operation) else {
            throw Failure(message: "Usage: \(programName) <store|get|erase|list|version>")
        }
        let settings = try PortalTokenCLI.loadSettings(flags: [:], environment: environment)
        try PortalTokenCLI.checkSettingValues(settings)
        let context = Context(
            streams: streams, environment: environment, settings: settings, programName: programName,
            services: services)
        context.audit = auditOperations[operation].map(AuditDraft.init)
        invocation.context = context
        var input = operation == "list" ? [] : streams.readAll(limit: maximumInputBytes)
        defer { zeroize(&input) }
        guard input.count <= maximumInputBytes else { throw Failure(message: "the request on stdin is too large") }
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
        var output = try perform(operation, input: input, context)
        streams.write(output, to: streams.output)
        zeroize(&output)
    }

    /// The operation, for the helper and the agent's `POST /v1/docker/OPERATION`: what the
    /// helper prints when it succeeds.
    static func perform(_ operation: String, input: [UInt8], _ context: Context) throws -> [UInt8] {
        switch operation {
        case "get": return try get(serverURL: try serverURL(input), context)
        case "store": try store(input, context)
        case "erase": try erase(serverURL: try serverURL(input), context)
        default: return try list(context)
        }
        return []
    }

    // MARK: Operations

    private static func get(serverURL: String, _ context: Context) throws -> [UInt8] {
        let request = try request(for: serverURL)
        context.audit?.describe(request)
        let helper = CredentialHelper(store: try context.credentials(), now: context.now)
        // The server URL's own slot: a registry URL without a path is not every path of its host.
        guard let credential = try helper.get(request, exactPath: true) else {
            context.audit?.outcome = .notFound
            throw Failure.notFound
        }
        return Array(
            (JSONValue.object([
                "ServerURL": .string(serverURL),
                "Username": .string(credential.username),
                "Secret": .string(credential.password.text),
            ]).serialized + "\n").utf8)
    }

    private static func store(_ input: [UInt8], _ context: Context) throws {
        guard let object = try? JSONValue.parse(input) else {
            throw Failure(
                message: "the credentials on stdin are not JSON of the form {\"ServerURL\",\"Username\",\"Secret\"}")
        }
        guard let serverURL = object["ServerURL"]?.stringValue, !serverURL.trimmingWhitespace.isEmpty else {
            throw Failure(message: "no credentials server URL")
        }
        // docker-credential-helpers refuses a blank username as it does a missing one.
        guard let username = object["Username"]?.stringValue, !username.trimmingWhitespace.isEmpty else {
            throw Failure(message: "no credentials username")
        }
        guard let secret = object["Secret"]?.stringValue else { throw Failure(message: "no credentials secret") }
        var request = try request(for: serverURL.trimmingWhitespace)
        context.audit?.describe(request)
        // The stored secret is packed line by line (SecretPacking): a line break in the Secret would
        // add `authtype=` or `credential=` lines that git then reads as fields the client never sent.
        // git refuses such a value in any field; so does this store.
        for (value, name) in [(username, "username"), (secret, "secret")] {
            guard !value.utf8.contains(where: { $0 == 10 || $0 == 13 || $0 == 0 }) else {
                throw Failure(message: "the \(name) holds a newline, CR or NUL")
            }
        }
        request.username = username
        request.password = Secret(secret)
        let helper = CredentialHelper(store: try context.credentials(), now: context.now)
        try helper.store(request)
    }

    /// Removes what `get` answers for the same server URL, and only that: a registry's URL names
    /// a host, where git may keep credentials for other paths and users that Docker never stored;
    /// a credential of another path (git's `forge.example/team/app.git`) is never its answer.
    private static func erase(serverURL: String, _ context: Context) throws {
        let request = try request(for: serverURL)
        context.audit?.describe(request)
        let helper = CredentialHelper(store: try context.credentials(), now: context.now)
        guard try helper.eraseAnswer(to: request, exactPath: true) > 0 else {
            context.audit?.outcome = .notFound
            throw Failure.notFound
        }
    }

    /// `{ServerURL: Username}` for every stored credential (never a secret).
    private static func list(_ context: Context) throws -> [UInt8] {
        var members: [String: JSONValue] = [:]
        for credential in try context.credentials().all() {
            members[url(of: credential)] = .string(credential.username)
        }
        return Array((JSONValue.object(members).serialized + "\n").utf8)
    }

    // MARK: Server URLs

    /// The server URL on stdin: one line, trimmed.
    private static func serverURL(_ input: [UInt8]) throws -> String {
        let text = String(decoding: input, as: UTF8.self).trimmingWhitespace
        guard !text.isEmpty else { throw Failure(message: "no credentials server URL") }
        return text
    }

    /// A registry server URL as git's `url=` splits it into protocol, host and path; without a
    /// scheme (`registry.example:5000`, Docker's usual form) it is https.
    static func request(for serverURL: String) throws -> CredentialRequest {
        guard !serverURL.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) else {
            throw Failure(message: "the server URL holds a control character")
        }
        let url = serverURL.contains("://") ? serverURL : "https://" + serverURL
        guard var request = try? CredentialProtocol.parse(Array("url=\(url)\n".utf8)), request.host != nil else {
            throw Failure(message: "the server URL is not a URL")
        }
        // Only protocol, host and path key a registry (docs/git-credential.md, "The Docker credential-helper
        // protocol"); a user or password written in the URL is not a filter, and Username comes from its own field.
        request.username = nil
        request.password = nil
        return request
    }

    /// Docker Hub's key in Docker's configuration, which Docker looks up by exact text.
    static let dockerHubServerURL = "https://index.docker.io/v1/"

    /// The URL `list` shows for a credential: protocol, host and path. Paths are kept without
    /// their trailing slash, so Docker Hub's key gets its slash back: Docker matches that one
    /// key as written, and every other key by its host.
    static func url(of credential: Credential) -> String {
        url(protocolName: credential.protocolName, host: credential.host?.gitHost, path: credential.path)
    }

    /// The same from the fields, as `list --format json` gives them.
    static func url(protocolName: String, host: String?, path: String?) -> String {
        var text = protocolName + "://" + (host ?? "")
        if let path, !path.isEmpty { text += "/" + path }
        return text + "/" == dockerHubServerURL ? dockerHubServerURL : text
    }
}
