import Foundation
@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The proxy's command line: what `proxy` and `exec --proxy` accept, read in this process.
@Suite("the proxy's command line")
struct ProxyCommandLineTests {
    @Test("--listen takes a loopback port only", arguments: ["0.0.0.0:80", "10.0.0.1:8", "127.0.0.1:", "x", "70000"])
    func listenLoopbackOnly(address: String) throws {
        let result = try InProcessCLI().run(["proxy", "--listen", address])
        #expect(result.exitCode == 2)
        #expect(result.stderr.contains("--listen takes 127.0.0.1:PORT"))
    }

    @Test("--listen and --socket exclude each other; --socket takes an absolute path")
    func socketAndListen() throws {
        let both = try InProcessCLI().run(["proxy", "--listen", "127.0.0.1:0", "--socket", "/tmp/x.sock"])
        #expect(both.exitCode == 2)
        let relative = try InProcessCLI().run(["proxy", "--socket", "x.sock"])
        #expect(relative.exitCode == 2 && relative.stderr.contains("--socket takes an absolute path"))
    }

    @Test(
        "--allow-path refuses what could be read as another path; --allow-method refuses CONNECT",
        arguments: [
            ["--allow-path", "api/v3"], ["--allow-path", "/api/../auth"], ["--allow-path", "/api/%2e%2e"],
            ["--allow-method", "CONNECT"], ["--allow-method", "G-T"],
        ])
    func allowances(arguments: [String]) throws {
        let result = try InProcessCLI().run(["proxy"] + arguments)
        #expect(result.exitCode == 2, "\(result.stderr)")
    }

    @Test("the parsed command holds the defaults, or the allowances given")
    func parsed() throws {
        let defaults = try #require(try Self.parse(["proxy"]))
        #expect(defaults.address == .loopback(port: 0))
        #expect(defaults.pathPrefixes == ProxyRules.defaultPathPrefixes)
        #expect(defaults.methods == ProxyRules.defaultMethods)
        let given = try #require(
            try Self.parse([
                "proxy", "--listen", "localhost:8787", "--allow-path", "/v1/a", "--allow-path", "/v1/b",
                "--allow-method", "get",
            ]))
        #expect(given.address == .loopback(port: 8787))
        #expect(given.pathPrefixes == ["/v1/a", "/v1/b"])
        #expect(given.methods == ["GET"])
    }

    @Test("exec takes --proxy or --token-var, not both")
    func execProxyExcludesTokenVar() throws {
        let result = try InProcessCLI().run(["exec", "--proxy", "--token-var", "X", "--", "true"])
        #expect(result.exitCode == 2)
    }

    static func parse(_ words: [String]) throws -> ProxyCommand? {
        var parsed = ParsedArguments(command: ProxyCommand.spec)
        try parsed.readCommand(words.dropFirst()[...])
        return try ProxyCommand(arguments: parsed)
    }
}
