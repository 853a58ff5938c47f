import Foundation
import PortalHTTP
import PortalTokenCore
import Testing

/// A throwaway CA, a server certificate for `localhost` only, and `openssl s_server` serving it
/// on loopback. Everything lives in a temporary directory removed by `stop()`.
final class TLSTestServer {
    let directory: URL
    let process = Process()
    private(set) var port = 0
    var caPath: String { directory.appendingPathComponent("ca.pem").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data("subjectAltName=DNS:localhost\n".utf8).write(to: directory.appendingPathComponent("ext.cnf"))
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=portal-token test CA",
            ])
        try openssl(["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
        ])

        // stdbuf: s_server's stdout is block-buffered on a pipe, and the port is printed there.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
        process.arguments = [
            "-oL", "/usr/bin/openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", "server.pem", "-key",
            "server.key", "-www",
        ]
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        // s_server prints "ACCEPT 127.0.0.1:<port>" once it listens; reading blocks until then.
        var text = ""
        func acceptLine() -> Substring? {
            text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().first { $0.hasPrefix("ACCEPT") }
        }
        while acceptLine() == nil {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let line = acceptLine(),
            let port = Int(line.split(separator: ":").last ?? "")
        else {
            stop()
            throw TLSTestServerError(output: text)
        }
        self.port = port
    }

    func stop() {
        if process.isRunning {
            // SIGKILL: the child inherits the test runner's signal mask, in which SIGTERM is blocked.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    private func openssl(_ arguments: [String]) throws {
        let run = Process()
        run.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        run.arguments = arguments
        run.currentDirectoryURL = directory
        run.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        run.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try run.run()
        run.waitUntilExit()
        guard run.terminationStatus == 0 else { throw TLSTestServerError(output: "openssl \(arguments[0]) failed") }
    }
}

struct TLSTestServerError: Error, CustomStringConvertible {
    let output: String
    var description: String { "could not start the TLS test server: \(output)" }
}

@Suite("TLS verification")
struct TLSTests {
    @Test("a certificate from an unknown CA is refused")
    func unknownCA() throws {
        let server = try TLSTestServer()
        defer { server.stop() }
        #expect {
            try CurlTransport().send(HTTPRequest(method: "GET", url: "https://localhost:\(server.port)/"))
        } throws: { error in
            guard case .tlsFailure(let host, _) = error as? HTTPError else { return false }
            return host == "localhost:\(server.port)"
        }
    }

    @Test("the extra CA bundle is trusted")
    func extraBundleTrusted() throws {
        let server = try TLSTestServer()
        defer { server.stop() }
        let transport = CurlTransport(options: HTTPTransportOptions(caBundlePath: server.caPath))
        let response = try transport.send(HTTPRequest(method: "GET", url: "https://localhost:\(server.port)/"))
        #expect(response.status == 200)
    }

    @Test("a trusted certificate for another name is still refused")
    func hostNameChecked() throws {
        let server = try TLSTestServer()
        defer { server.stop() }
        let transport = CurlTransport(options: HTTPTransportOptions(caBundlePath: server.caPath))
        #expect {
            try transport.send(HTTPRequest(method: "GET", url: "https://127.0.0.1:\(server.port)/"))
        } throws: { error in
            guard case .tlsFailure = error as? HTTPError else { return false }
            return true
        }
    }

    @Test("a CA bundle that cannot be read is an error naming its path")
    func unreadableBundle() {
        let transport = CurlTransport(options: HTTPTransportOptions(caBundlePath: "/nonexistent/ca.pem"))
        #expect(throws: HTTPError.caBundleUnreadable(path: "/nonexistent/ca.pem")) {
            try transport.send(HTTPRequest(method: "GET", url: "https://localhost:1/"))
        }
    }
}
