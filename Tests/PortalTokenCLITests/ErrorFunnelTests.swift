import Foundation
import PortalTokenTestSupport
import Testing

/// Configuration errors are the usage errors they are (exit 2, with a hint), and reach only the
/// requests they concern (docs/exit-codes.md, "The codes").
@Suite("configuration errors in the credential protocol")
struct ConfigurationErrorTests {
    @Test("with neither HOME nor XDG_DATA_HOME, get for Portal says where to put the store (exit 2)")
    func noHome() throws {
        let environment = ProcessRunner.environment([
            "HOME": nil, "XDG_DATA_HOME": nil, "XDG_CONFIG_HOME": nil, "PORTAL_TOKEN_FILE": nil, "PORTAL_API_HOST": nil,
            "PORTAL_TOKEN_BACKEND": "file", "PORTAL_AUTH_ENVIRONMENT_ID": "env-no-home",
            "PORTAL_TOKEN_PASSPHRASE": "unused",
        ])
        let result = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=api.portalhq.io\n\n", environment: environment)
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(
            result.stderr == """
                portal-token: error: cannot place the encrypted store: neither XDG_DATA_HOME nor HOME is set
                hint: set PORTAL_TOKEN_FILE to the store's path

                """)
        #expect(result.stdout.isEmpty)
    }

    @Test("a bad PORTAL_API_HOST leaves git's credentials for other hosts alone, and stops a request for Portal")
    func badAPIHost() throws {
        let git = try GitHarness(backend: .file, extraEnvironment: ["PORTAL_API_HOST": "https://api.mine.example/ bad"])
        let approve = try git.credential(
            "approve", "protocol=https\nhost=github.com\nusername=alice\npassword=secret-1\n\n")
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        let fill = try git.credential("fill", "protocol=https\nhost=github.com\n\n")
        #expect(fill.exitCode == 0, "\(fill.stderr)")
        #expect(fill.stdout.contains("password=secret-1\n"))
        #expect(!fill.stderr.contains("askpass"))
        for host in ["api.portalhq.io", "api.mine.example"] {
            let portal = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
            #expect(portal.exitCode == 2, "\(host): \(portal.stderr)")
            #expect(portal.stderr.hasPrefix("portal-token: error: PORTAL_API_HOST: "))
            #expect(portal.stderr.contains("\nhint: "))
        }
    }
}
