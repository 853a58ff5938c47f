import Foundation
import PortalTokenTestSupport
import Testing

/// The quiet contract of a real process over the real store: nothing on stderr on success,
/// protocol lines only on stdout.
@Suite("command line in a real process")
struct CommandLineTests {
    @Test("success is silent on stderr, and stdout carries protocol lines only")
    func quietOnSuccess() throws {
        let host = GitHarness.uniqueHost("quiet")
        let password = String(repeating: "p", count: 64 * 1024)
        let store = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=\(password)\n")
        #expect(store.exitCode == 0 && store.stdout.isEmpty && store.stderr.isEmpty)
        let get = try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
        #expect(get.exitCode == 0 && get.stderr.isEmpty)
        #expect(get.stdout == "username=u\npassword=\(password)\n")
        let erase = try ProcessRunner.portalToken(["erase"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(erase.exitCode == 0 && erase.stdout.isEmpty && erase.stderr.isEmpty)
        let miss = try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(miss.exitCode == 0 && miss.stdout.isEmpty && miss.stderr.isEmpty)
    }
}
