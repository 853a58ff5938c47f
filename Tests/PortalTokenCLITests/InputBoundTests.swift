import Foundation
import PortalTokenTestSupport
import Testing

/// Credential input on stdin is bounded: 1 MiB in all (docs/git-credential.md, "The credential protocol, exactly").
@Suite("stdin bound")
struct InputBoundTests {
    @Test("a request past 1 MiB is a usage error (exit 2) and stores nothing; one just under it is accepted")
    func oversizedRequest() throws {
        let git = try GitHarness(backend: .file)
        let host = GitHarness.uniqueHost("bound")
        let header = "protocol=https\nhost=\(host)\nusername=alice\npassword="
        let oversized = header + String(repeating: "p", count: 1 << 20) + "\n\n"
        let store = try git.portalToken(["store"], stdin: oversized)
        #expect(store.exitCode == 2)
        #expect(store.stderr.hasPrefix("portal-token: error: the credential request on stdin is larger than 1 MiB"))
        #expect(!store.stderr.contains("ppppppppp"))
        let get = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
        #expect(get.exitCode == 0 && get.stdout.isEmpty)
        // A line with no end at all is refused too, rather than read for ever.
        let endless = try git.portalToken(["get"], stdin: String(repeating: "x", count: 1_200_000))
        #expect(endless.exitCode == 2)

        let fits = header + String(repeating: "p", count: 1_000_000) + "\n\n"
        #expect(try git.portalToken(["store"], stdin: fits).exitCode == 0)
        let found = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
        #expect(found.stdout.contains("password=" + String(repeating: "p", count: 1_000_000) + "\n"))
    }
}
