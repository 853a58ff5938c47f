import Foundation
import PortalTokenTestSupport
import Testing

@Suite("command line")
struct CommandLineTests {
    @Test("--version prints the version on stdout")
    func version() throws {
        let result = try ProcessRunner.portalToken(["--version"])
        #expect(result.exitCode == 0)
        #expect(result.stdout.hasPrefix("portal-token "))
        #expect(result.stderr.isEmpty)
    }

    @Test("--help lists every command, and each command has its own help", arguments: ["get", "store", "erase"])
    func help(command: String) throws {
        let overview = try ProcessRunner.portalToken(["--help"])
        #expect(overview.exitCode == 0 && overview.stdout.contains("  \(command) "))
        let own = try ProcessRunner.portalToken([command, "--help"])
        #expect(own.exitCode == 0)
        #expect(own.stdout.hasPrefix("usage: portal-token \(command)"))
    }

    @Test("an unknown command or option is a usage error (exit 2)")
    func unknownCommand() throws {
        let command = try ProcessRunner.portalToken(["frobnicate"])
        #expect(command.exitCode == 2)
        #expect(command.stderr == "portal-token: error: 'frobnicate' is not a portal-token command\nhint: see 'portal-token --help'\n")
        let option = try ProcessRunner.portalToken(["get", "--colour"], stdin: "")
        #expect(option.exitCode == 2)
        #expect(option.stderr.contains("unknown option '--colour'"))
    }

    @Test("under the git helper name an unknown operation is ignored with exit 0")
    func unknownOperationAsGitHelper() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-link-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let link = directory.appendingPathComponent("git-credential-portal-token").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: ProcessRunner.portalTokenPath)
        let result = try ProcessRunner.run(link, ["frobnicate"], stdin: "protocol=https\nhost=x.tld\n")
        #expect(result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty)
    }

    @Test("a malformed protocol line is refused without echoing it", arguments: [
        "protocol=https\nhost=x.tld\nhunter2-secret\n",
        "protocol=https\nhost=x.tld\npassword=hunter2\r-secret\r\n",
    ])
    func malformedInput(input: String) throws {
        for operation in ["get", "store", "erase"] {
            let result = try ProcessRunner.portalToken([operation], stdin: input)
            #expect(result.exitCode == 2)
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.hasPrefix("portal-token: error: line 3 of the credential input"))
            #expect(!result.stderr.contains("hunter2"))
        }
    }

    @Test("success is silent on stderr, and stdout carries protocol lines only")
    func quietOnSuccess() throws {
        let host = GitHarness.uniqueHost("quiet")
        let password = String(repeating: "p", count: 64 * 1024)
        let store = try ProcessRunner.portalToken(["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=\(password)\n")
        #expect(store.exitCode == 0 && store.stdout.isEmpty && store.stderr.isEmpty)
        let get = try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n\n")
        #expect(get.exitCode == 0 && get.stderr.isEmpty)
        #expect(get.stdout == "username=u\npassword=\(password)\n")
        let erase = try ProcessRunner.portalToken(["erase"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(erase.exitCode == 0 && erase.stdout.isEmpty && erase.stderr.isEmpty)
        let miss = try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(miss.exitCode == 0 && miss.stdout.isEmpty && miss.stderr.isEmpty)
    }

    @Test("a config file with an unknown key is a configuration error naming the line")
    func badConfigFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("config")
        try "backend = auto\ncolour = blue\n".write(to: config, atomically: true, encoding: .utf8)
        let result = try ProcessRunner.portalToken(["--config", config.path, "get"], stdin: "protocol=https\nhost=x.tld\n")
        #expect(result.exitCode == 2)
        #expect(result.stderr.contains("\(config.path):2: unknown setting 'colour'"))
    }
}
