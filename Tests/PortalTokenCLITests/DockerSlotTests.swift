import Foundation
import PortalTokenTestSupport
import Testing

/// The Docker helper answers for a server URL's own slot, never for a path-scoped git credential
/// on the same host.
@Suite("the Docker helper's slot")
struct DockerSlotTests {
    @Test("get and erase for a host leave a path-scoped git credential of another user alone")
    func pathScopedCredential() throws {
        let git = try GitHarness(backend: .file)
        let scratch = try ScratchFolder("docker-slot")
        let helper = try DockerHelperTests.helperDirectory(scratch) + "/docker-credential-portal-token"
        func run(_ operation: String, _ input: String) throws -> ProcessResult {
            try ProcessRunner.run(helper, [operation], stdin: input, environment: git.environment)
        }
        let host = GitHarness.uniqueHost("forge")
        let bob = "protocol=https\nhost=\(host)\npath=team/app.git\nusername=bob\npassword=bob-secret\n"
        #expect(try git.portalToken(["store"], stdin: bob).exitCode == 0)

        for serverURL in [host, "https://\(host)", "https://\(host)/"] {
            let get = try run("get", serverURL)
            #expect(get.exitCode == 1, "\(serverURL): \(get.stdout)")
            #expect(get.stdout == "credentials not found in native keychain\n", "\(serverURL): \(get.stdout)")
            let erase = try run("erase", serverURL)
            #expect(erase.exitCode == 1 && erase.stdout == "credentials not found in native keychain\n")
        }
        let kept = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\npath=team/app.git\n")
        #expect(kept.stdout.contains("password=bob-secret"), "\(kept.stdout)")

        // The exact slot still answers: the URL naming the path, and a host-wide Docker login.
        let exact = try run("get", "https://\(host)/team/app.git")
        #expect(exact.exitCode == 0 && exact.stdout.contains(#""Secret":"bob-secret""#), "\(exact.stdout)")
        #expect(
            try run("store", #"{"ServerURL":"\#(host)","Username":"robot","Secret":"robot-secret"}"#).exitCode == 0)
        let login = try run("get", host)
        #expect(login.exitCode == 0 && login.stdout.contains(#""Username":"robot""#), "\(login.stdout)")
        #expect(!login.stdout.contains("bob-secret"))
        #expect(try run("erase", host).exitCode == 0)
        let after = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\npath=team/app.git\n")
        #expect(after.stdout.contains("password=bob-secret"), "\(after.stdout)")
    }
}
