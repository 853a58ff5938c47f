import Basics
import PortalTokenCore

/// The Docker credential-helper protocol's operations (docs/git-credential.md, "The Docker
/// credential-helper protocol"), for `docker-credential-portal-token` and the agent's
/// `POST /v1/docker/OPERATION`: `get`, `store`, `erase` and `list` on the same generic store as
/// git's, keyed by protocol, host and path as git's `url=` splits them. A failure is Docker's:
/// one line, which the helper prints on stdout with exit 1.
package enum DockerCredentials {
    package static let notFoundMessage = "credentials not found in native keychain"
    /// Every failure's exit status, Docker's 1.
    package static let failed = ExitCode.notSignedIn

    package struct Failure: Error {
        package let message: String
        /// Docker's "credentials not found", which its clients read as no credential.
        package var isNotFound = false

        package init(message: String, isNotFound: Bool = false) {
            (self.message, self.isNotFound) = (message, isNotFound)
        }

        package static let notFound = Failure(message: notFoundMessage, isNotFound: true)
    }

    /// What the audit log calls each operation.
    package static let auditOperations: [String: AuditOperation] = [
        "get": .dockerGet, "store": .dockerStore, "erase": .dockerErase, "list": .dockerList,
    ]

    /// What the helper prints when the operation succeeds.
    package static func run(_ operation: String, input: [UInt8], _ context: Context) throws -> [UInt8] {
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
    package static func request(for serverURL: String) throws -> CredentialRequest {
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
    package static let dockerHubServerURL = "https://index.docker.io/v1/"

    /// The URL `list` shows for a credential: protocol, host and path. Paths are kept without
    /// their trailing slash, so Docker Hub's key gets its slash back: Docker matches that one
    /// key as written, and every other key by its host.
    package static func url(of credential: Credential) -> String {
        url(protocolName: credential.protocolName, host: credential.host?.gitHost, path: credential.path)
    }

    /// The same from the fields, as `list --format json` gives them.
    package static func url(protocolName: String, host: String?, path: String?) -> String {
        var text = protocolName + "://" + (host ?? "")
        if let path, !path.isEmpty { text += "/" + path }
        return text + "/" == dockerHubServerURL ? dockerHubServerURL : text
    }
}
