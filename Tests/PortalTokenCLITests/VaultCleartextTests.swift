import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A cleartext Vault address: the Vault token and every secret would cross the network readable.
@Suite("the Vault store over http://")
struct VaultCleartextTests {
    /// A TCP listener on every address of this host that records each request line it is sent
    /// and answers 403: a stand-in Vault that tells whether portal-token connected at all.
    static let listener = #"""
        import socket, sys
        received = sys.argv[1]
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("0.0.0.0", 0))
        server.listen(8)
        print("port %d" % server.getsockname()[1], file=sys.stderr, flush=True)
        while True:
            connection, _ = server.accept()
            connection.settimeout(2)
            try:
                data = connection.recv(65536)
            except socket.timeout:
                data = b""
            with open(received, "ab") as out:
                out.write(data.split(b"\r\n")[0] + b"\n")
            body = b'{"errors":["permission denied"]}'
            connection.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body)
            connection.close()
        """#

    @Test("http:// to a name that is not loopback is refused with exit 2 before any connection; loopback is not")
    func cleartextAddress() throws {
        let git = try GitHarness(backend: .file)
        let received = git.directory.path + "/received"
        let server = try RunningProcess(
            "/usr/bin/python3", ["-c", Self.listener, received], environment: ["PATH": "/usr/bin:/bin"])
        defer { server.signal(SIGKILL) }
        let port = try #require(
            try server.waitForStderr(containing: "port ").split(separator: " ").last.flatMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            })
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let hostName = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        func list(_ address: String, _ extra: [String: String] = [:]) throws -> ProcessResult {
            var environment = git.environment
            environment["PORTAL_TOKEN_BACKEND"] = "vault"
            environment["VAULT_ADDR"] = address
            environment["VAULT_TOKEN"] = "vault-canary-token"
            environment["VAULT_CACERT"] = nil
            for (key, value) in extra { environment[key] = value }
            return try ProcessRunner.run(ProcessRunner.portalTokenPath, ["list"], environment: environment)
        }
        func requests() -> String { (try? String(contentsOfFile: received, encoding: .utf8)) ?? "" }

        for address in ["http://vault.example:8200", "http://\(hostName):\(port)", "HTTP://\(hostName):\(port)/"] {
            let refused = try list(address)
            #expect(refused.exitCode == 2, "\(address): \(refused.stderr)")
            #expect(
                refused.stderr.contains("portal-token: error: VAULT_ADDR is a cleartext http:// address"),
                "\(address): \(refused.stderr)")
            #expect(refused.stderr.contains("hint: "), "\(refused.stderr)")
            #expect(!refused.stderr.contains("vault-canary-token"))
        }
        #expect(requests().isEmpty, "connected: \(requests())")

        // Loopback stays open to a local Vault Agent or proxy, and the named setting opens the rest.
        _ = try list("http://127.0.0.1:\(port)")
        #expect(requests().contains("/v1/"), "\(requests())")
        let before = requests()
        _ = try list("http://\(hostName):\(port)", ["PORTAL_TOKEN_VAULT_ALLOW_HTTP": "true"])
        #expect(requests().count > before.count, "\(requests())")
    }
}
