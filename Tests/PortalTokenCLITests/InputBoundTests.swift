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

/// A blank line ends the request, so a caller that keeps stdin open is not waited on
/// (docs/git-credential.md, "The credential protocol, exactly").
@Suite("request end")
struct RequestEndTests {
    @Test(
        "get answers at the blank line, LF or CRLF, while the writer keeps stdin open",
        arguments: ["protocol=https\nhost=x\n\n", "protocol=https\r\nhost=x\r\n\r\n", "\r\n"])
    func blankLineWithStdinOpen(request: String) throws {
        let git = try GitHarness(backend: .file)
        let held = try HeldOpenInput(request)
        let started = ProcessRunner.monotonicSeconds()
        let pid = try ProcessRunner.spawn(
            ProcessRunner.portalTokenPath, ["get"], environment: git.environment,
            stdin: held.fifo, stdout: held.path("out"), stderr: held.path("err"))
        let status = ProcessRunner.wait(pid, timeout: 10)
        let elapsed = ProcessRunner.monotonicSeconds() - started
        if status == nil {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
        #expect(status != nil, "get still waited on stdin after \(elapsed) s")
        #expect(elapsed < 1.0, "took \(elapsed) s")
        // A lone blank line asks for the session token (script mode), whose answer depends on
        // the settings; a request for a host with nothing stored prints nothing, exit 0.
        if request != "\r\n" {
            #expect(status == 0, "\(held.read("err"))")
            #expect(held.read("out").isEmpty)
        }
    }
}

/// A FIFO holding `text`, whose write end stays open as long as this lives: a reader sees the text
/// and then waits, as on a pipe whose writer has not finished.
final class HeldOpenInput {
    let directory: String
    let fifo: String
    private let writer: Int32

    init(_ text: String) throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "portal-token-held-\(UUID().uuidString)"
            ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        fifo = directory + "/stdin"
        guard mkfifo(fifo, 0o600) == 0 else { throw HeldOpenFailure(step: "mkfifo", code: errno) }
        writer = open(fifo, O_RDWR | O_CLOEXEC)
        guard writer >= 0 else { throw HeldOpenFailure(step: "open", code: errno) }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
    }

    deinit {
        close(writer)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func read(_ name: String) -> String {
        (try? String(contentsOfFile: path(name), encoding: .utf8)) ?? ""
    }
}

struct HeldOpenFailure: Error {
    let step: String
    let code: Int32
}
