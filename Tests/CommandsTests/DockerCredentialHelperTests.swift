@testable import Commands
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
}
