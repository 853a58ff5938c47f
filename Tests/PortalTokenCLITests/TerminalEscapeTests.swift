import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Strings from Portal or the store reach a terminal with their control characters escaped
/// (docs/security.md, "Hardening rules").
@Suite("terminal escapes")
struct TerminalEscapeTests {
    static let hostile = "user\u{1b}]0;owned\u{07}\u{1b}[2J\u{9b}31m"

    static func expectNoRawControls(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let raw = text.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n") || ($0.value >= 0x7f && $0.value <= 0x9f)
        }
        #expect(raw.isEmpty, "raw control characters: \(raw.map { $0.value })", sourceLocation: sourceLocation)
    }

    @Test(
        "an endUserId carrying escape sequences, from the store: status prints no raw ESC or BEL",
        arguments: TestBackend.allCases)
    func hostileEndUser(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        let adopted = try portal.adopt(token: "token-escapes", endUserID: Self.hostile)
        #expect(adopted.exitCode == 0, "\(adopted.stderr)")
        let status = try portal.git.portalToken(["status"])
        #expect(status.exitCode == 0, "\(status.stderr)")
        Self.expectNoRawControls(status.stdout + status.stderr)
        #expect(status.stdout.contains(#"signed in as user\x1b]0;owned\x07\x1b[2J\u{9b}31m"#))
        let json = try portal.git.portalToken(["status", "--format", "json"])
        #expect(json.exitCode == 0)
        Self.expectNoRawControls(json.stdout)
    }

    @Test("a server's error text with escape sequences is escaped in the error line")
    func hostileErrorText() throws {
        let harness = try SignInHarness(backend: .file, redirectURL: "portalexample://auth/callback")
        let result = try harness.run(
            ["redirect", "-"],
            stdin: "portalexample://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK&error=x%1B%5D0%3Bowned%07\n")
        #expect(result.exitCode == 6)
        Self.expectNoRawControls(result.stderr)
        #expect(result.stderr.contains("sign-in failed: x"))
    }

    /// A line of stderr that portal-token did not write: text from outside that would have started
    /// a new line of its own, which git shows the user as if it came from portal-token.
    static let forged = "portal-token: signed in as admin"

    static func expectNoForgedLine(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            !text.split(separator: "\n").contains { $0.hasPrefix(forged) }, "a forged line: \(text)",
            sourceLocation: sourceLocation)
    }

    @Test("a line break in text from Portal, the store or the environment never starts a line of its own")
    func lineBreaks() throws {
        // From Portal: an end user ID (JSON's \n in the exchange's answer), and a redirect's error text.
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback",
            endUser: .init(id: #"end-user\n\#(Self.forged)"#))
        let link = FakeClientAuth.redirect(
            harness.redirectURL, grant: harness.auth.issueGrant(method: .google), method: .google)
        let signedIn = try harness.run(["redirect", "-"], stdin: link + "\n")
        #expect(signedIn.exitCode == 0, "\(signedIn.stderr)")
        Self.expectNoForgedLine(signedIn.stderr)
        #expect(signedIn.stderr.hasPrefix(#"portal-token: signed in as end-user\x0a\#(Self.forged) in environment"#))
        #expect(signedIn.stderr.split(separator: "\n").count == 1, "\(signedIn.stderr)")

        let refused = try harness.run(
            ["redirect", "-"],
            stdin: "portalexample://auth/callback?token=g&login_type=GOOGLE&error=x%0D%0A"
                + "portal-token%3A%20signed%20in%20as%20admin\n")
        #expect(refused.exitCode == 6)
        Self.expectNoForgedLine(refused.stderr)
        #expect(refused.stderr.hasPrefix("portal-token: error: sign-in failed: x"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 2, "an error and a hint: \(refused.stderr)")

        // From the store: the stored end user ID, in the line 'refresh' writes.
        let status = try harness.run(["refresh"])
        Self.expectNoForgedLine(status.stderr)

        // From the environment: KUBERNETES_EXEC_INFO, and a config file's path.
        let execInfo = try harness.run(
            ["exec-credential"], ["KUBERNETES_EXEC_INFO": #"{"apiVersion":"v9\n\#(Self.forged)"}"#])
        #expect(execInfo.exitCode == 2)
        Self.expectNoForgedLine(execInfo.stderr)
        #expect(execInfo.stderr.split(separator: "\n").count == 2, "an error and a hint: \(execInfo.stderr)")
        let config = try harness.run(["get"], stdin: "", ["PORTAL_TOKEN_CONFIG": "/nonexistent\n\(Self.forged)"])
        #expect(config.exitCode == 2)
        Self.expectNoForgedLine(config.stderr)

        // Docker's helper writes its one error line on stdout.
        let scratch = try ScratchFolder("docker-lines")
        let docker = try ProcessRunner.run(
            try DockerHelperTests.helperDirectory(scratch) + "/docker-credential-portal-token", ["list"],
            environment: harness.environment(["PORTAL_TOKEN_CONFIG": "/nonexistent\n\(Self.forged)"]))
        #expect(docker.exitCode == 1)
        Self.expectNoForgedLine(docker.stdout)
        #expect(docker.stdout.split(separator: "\n").count == 1, "\(docker.stdout)")
    }

    @Test("escaping shows C0, DEL and C1 controls as escapes and leaves other text alone")
    func escaping() {
        #expect(TerminalText.escaped("plain ünïcode \\ text") == "plain ünïcode \\ text")
        #expect(TerminalText.escaped("a\u{1b}b\u{7}c\u{7f}d\u{85}e\nf") == #"a\x1bb\x07c\x7fd\u{85}e\x0af"#)
        #expect(TerminalText.escaped("line one\nline\u{1b} two", keepingNewlines: true) == "line one\nline\\x1b two")
    }
}
