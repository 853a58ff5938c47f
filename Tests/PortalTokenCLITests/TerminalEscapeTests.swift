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

    @Test("escaping shows C0, DEL and C1 controls as escapes and leaves other text alone")
    func escaping() {
        #expect(TerminalText.escaped("plain ünïcode \\ text") == "plain ünïcode \\ text")
        #expect(TerminalText.escaped("a\u{1b}b\u{7}c\u{7f}d\u{85}e\nf") == #"a\x1bb\x07c\x7fd\u{85}e\x0af"#)
        #expect(TerminalText.escaped("line one\nline\u{1b} two", keepingNewlines: true) == "line one\nline\\x1b two")
    }
}
