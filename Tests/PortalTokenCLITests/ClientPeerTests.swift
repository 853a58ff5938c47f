import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// Client mode checks who listens on the socket before it sends anything.
@Suite("client mode and the agent's uid")
struct ClientPeerTests {
    /// A fake agent run as uid 65534: it records what it receives and answers every request with a
    /// session of its choosing.
    static let fakeAgent = #"""
        import socket, sys
        path, received = sys.argv[1], sys.argv[2]
        body = (b'{"token":"fake-agent-token","endUserId":"u","authEnvironmentId":"e",'
            b'"expiresAt":"2999-01-01T00:00:00Z"}')
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(8)
        print("fake agent ready", file=sys.stderr, flush=True)
        while True:
            connection, _ = server.accept()
            connection.settimeout(1)
            data = b""
            try:
                while True:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    if b"\r\n\r\n" in data and (b"Content-Length" not in data or data.endswith(b"\n")):
                        break
            except socket.timeout:
                pass
            with open(received, "ab") as out:
                out.write(data)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nPortal-Token-Exit: 0\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body)
            connection.close()
        """#

    @Test("a socket another uid listens on is refused before anything is sent: exit 4 naming the socket")
    func foreignAgent() throws {
        let harness = try AgentHarness(start: false)
        chmod(harness.scratch, 0o755)
        let directory = harness.scratch + "/shared"
        mkdir(directory, 0o755)
        chown(directory, 65534, 65534)
        let socket = directory + "/agent.sock"
        let received = directory + "/received"
        let fake = try RunningProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", Self.fakeAgent, socket,
                received,
            ],
            environment: ["PATH": "/usr/bin:/bin"])
        try fake.waitForStderr(containing: "fake agent ready")
        defer { fake.signal(SIGKILL) }

        let store = try harness.client(
            ["store"], stdin: "protocol=https\nhost=shared.example\nusername=u\npassword=canary-password\n",
            socket: socket)
        #expect(store.exitCode == 4, "\(store.stdout) \(store.stderr)")
        #expect(store.stderr.contains("portal-token: error: "), "\(store.stderr)")
        #expect(store.stderr.contains(socket), "\(store.stderr)")
        #expect(store.stderr.contains("uid 65534"), "\(store.stderr)")
        #expect(!store.stderr.contains("canary-password"))

        let exec = try harness.client(
            ["exec", "--", "/bin/sh", "-c", "echo \"$PORTAL_CLIENT_SESSION_TOKEN\""], socket: socket)
        #expect(exec.exitCode == 4, "\(exec.stdout) \(exec.stderr)")
        #expect(!exec.stdout.contains("fake-agent-token"))
        #expect(exec.stderr.contains(socket), "\(exec.stderr)")

        let seen = (try? String(contentsOfFile: received, encoding: .utf8)) ?? ""
        #expect(!seen.contains("canary-password"), "the fake agent received: \(seen)")
        #expect(seen.isEmpty, "the fake agent received: \(seen)")
    }
}
