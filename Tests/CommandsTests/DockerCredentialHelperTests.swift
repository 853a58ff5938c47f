@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// `docker-credential-portal-token`, run in-process over the same fake store as git's commands.
@Suite("Docker credential-helper protocol in-process")
struct DockerCredentialHelperTests {
    /// The fields of a Docker `store`, JSON-escaped; the one under test holds `character`.
    static func storeRequest(field: String, character: String) -> String {
        var fields = ["ServerURL": "registry.example", "Username": "docker-user", "Secret": "docker-secret"]
        fields[field, default: ""] += "\(character)authtype=Bearer\(character)credential=injected"
        return "{" + fields.map { #""\#($0.key)":"\#($0.value)""# }.joined(separator: ",") + "}"
    }

    @Test(
        "store refuses a newline, CR or NUL in any field, as git refuses one in a credential",
        arguments: ["ServerURL", "Username", "Secret"], [#"\n"#, #"\r"#, #"\u0000"#])
    func storeRefusesLineBreaks(field: String, character: String) throws {
        let cli = try InProcessCLI()
        let store = cli.runDocker("store", stdin: Self.storeRequest(field: field, character: character))
        #expect(store.exitCode == 1 && store.stderr.isEmpty, "\(store.stdout)")
        let refusal = [
            "ServerURL": "the server URL holds a control character",
            "Username": "the username holds a newline, CR or NUL",
            "Secret": "the secret holds a newline, CR or NUL",
        ]
        #expect(store.stdout == refusal[field]! + "\n")
        #expect(try cli.credentials.all().isEmpty, "a refused store stores nothing")
        // Above all, git is handed no authtype/credential pair the Docker client never stored as one.
        let get = cli.run(
            ["get"], stdin: "capability[]=authtype\nprotocol=https\nhost=registry.example\n\n", isGitHelper: true)
        #expect(!get.stdout.contains("injected"), "\(get.stdout)")
    }

    @Test("erase removes only the credential get answers for the same server URL, not the host's others")
    func eraseRemovesWhatGetAnswers() throws {
        let cli = try InProcessCLI()
        // git's own credentials on the registry's host: one for a repository path, one for another user.
        for (path, user) in [("org/repo.git", "git-user"), (nil, "other-user")] {
            let pathLine = path.map { "path=\($0)\n" } ?? ""
            let stored = cli.run(
                ["store"],
                stdin: "protocol=https\nhost=registry.example\n\(pathLine)username=\(user)\npassword=\(user)-secret\n",
                isGitHelper: true)
            #expect(stored.exitCode == 0, "\(stored.stderr)")
        }
        let store = cli.runDocker(
            "store", stdin: #"{"ServerURL":"registry.example","Username":"docker-user","Secret":"docker-secret"}"#)
        #expect(store.exitCode == 0 && store.stdout.isEmpty, "\(store.stdout)")
        let get = cli.runDocker("get", stdin: "registry.example\n")
        #expect(get.exitCode == 0 && get.stdout.contains(#""Username":"docker-user""#), "\(get.stdout)")

        let erase = cli.runDocker("erase", stdin: "registry.example\n")
        #expect(erase.exitCode == 0 && erase.stdout.isEmpty, "\(erase.stdout)")
        let left = try cli.credentials.all().map { "\($0.username)@\($0.path ?? "")" }.sorted()
        #expect(left == ["git-user@org/repo.git", "other-user@"])
        let repository = cli.run(
            ["get"], stdin: "protocol=https\nhost=registry.example\npath=org/repo.git\n\n", isGitHelper: true)
        #expect(repository.stdout.contains("password=git-user-secret"), "\(repository.stdout)")
    }
}
