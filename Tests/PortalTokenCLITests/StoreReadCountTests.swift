import Foundation
import PortalTokenTestSupport
import Testing

/// How often one command touches the store file, counted with strace on the real binary: the
/// session path reads the store once, and writes it once when the expiry slides, under the
/// store file's one lock (docs/storage.md, "The encrypted file").
@Suite("store file reads, counted")
struct StoreReadCountTests {
    @Test("token past the idle window reads the store file once, writes it once and takes two file locks")
    func tokenPastIdleWindow() throws {
        let strace = try #require(
            ["/usr/bin/strace", "/bin/strace"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "strace is not installed: run contrib/deps.sh test")
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-idle")
        #expect(try portal.adopt(token: "token-idle", endUserID: "U").exitCode == 0)
        let store = try #require(portal.git.environment["PORTAL_TOKEN_FILE"])
        let trace = portal.git.directory.appendingPathComponent("strace.log").path
        var environment = try portal.environment(clockShift: 25 * 3600)
        // No copy of the session or of the key in the kernel keyring: the store is what answers.
        environment["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "0"
        let result = try ProcessRunner.run(
            strace,
            [
                "-f", "-qq", "-e", "trace=open,openat,rename,renameat,renameat2,flock", "-o", trace,
                ProcessRunner.portalTokenPath, "token",
            ], environment: environment, timeout: 60)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout == "token-idle\n")
        #expect(portal.requests(to: "/api/v3/clients/me").count == 1, "Portal was not asked once")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        let reads = lines.filter { $0.contains("open") && $0.contains("\"\(store)\"") && !$0.contains("O_CREAT") }
        let writes = lines.filter { $0.contains("rename") && $0.hasSuffix("\"\(store)\") = 0") }
        #expect(reads.count == 1, "the store file was opened \(reads.count) times:\n\(reads.joined(separator: "\n"))")
        #expect(writes.count == 1, "the store file was replaced \(writes.count) times")
        // Two file locks: the store file's own lock around the slide and its write, and the audit
        // log's around its line (docs/storage.md, "The store lock").
        let lockFiles = lines.filter { $0.contains("open") && $0.contains(".lock\"") }
        #expect(lockFiles.count == 1 && lockFiles.allSatisfy { $0.contains("\"\(store).lock\"") }, "\(lockFiles)")
        let flocks = lines.filter { $0.contains("flock(") }
        #expect(flocks.count == 2, "\(flocks.count) file locks were taken:\n\(flocks.joined(separator: "\n"))")
    }
}
