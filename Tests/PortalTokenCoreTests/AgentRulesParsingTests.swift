import PortalTokenCore
import Testing

/// The rules file's bytes, read strictly: line ends, control characters, rules with no condition.
@Suite("reading the agent's rules file")
struct AgentRulesParsingTests {
    static let sandbox = CallerIdentity(
        uid: 1000, gid: 1000, pid: 4343, sameUserNamespace: false, cgroup: "/user.slice")

    static func line(of text: String) -> Int? {
        do {
            _ = try AgentRules.parse(text.utf8)
            return nil
        } catch {
            return error.line
        }
    }

    @Test("a CR before a LF is dropped, so a CR LF file reads as its LF form, and no CR joins two lines")
    func lineEndings() throws {
        let lf = try AgentRules.parse("rule build\n    container docker:3f2a*\n    allow token env\n".utf8)
        let crlf = try AgentRules.parse("rule build\r\n    container docker:3f2a*\r\n    allow token env\r\n".utf8)
        #expect(crlf == lf)
        let mixed = try AgentRules.parse("rule build\n    allow token env\r\n    container docker:3f2a*\n".utf8)
        #expect(mixed.rules.first?.conditions == [.container("docker:3f2a*")])
        #expect(mixed.rules.first?.grants == [.token(["env"])])
        #expect(!mixed.decide(.token(environment: "env"), for: Self.sandbox, on: .restricted, agentUID: 1000).allowed)
        // No final LF: the last line's CR is still its ending.
        #expect(try AgentRules.parse("rule a\n  uid 1\r".utf8).rules.first?.conditions == [.uid(1)])
    }

    @Test("any other control character, a format character or bytes that are not UTF-8 name their line")
    func controlCharacters() {
        for (text, line) in [
            ("rule a\n  uid 1\r  allow token *\n", 2), ("rule a\n  uid 1\0\n", 2), ("rule a\u{0b}\n", 1),
            ("rule a\n  uid 1 # \u{1b}[2J\n", 2), ("rule a\n  uid 1\n  allow token *\u{7f}\n", 3),
            ("rule a\n  uid 1\u{85}\n", 2), ("rule a\n  uid 1\n  allow token e\u{202e}x\n", 3),
            ("rule a\n\u{2028}  uid 1\n", 2), ("\u{feff}rule a\n  uid 1\n", 1), ("rule a\r\r\n  uid 1\n", 1),
        ] {
            #expect(Self.line(of: text) == line, "\(text.debugDescription)")
        }
        var bytes = Array("rule a\n  uid 1\n  allow token ".utf8)
        bytes += [0xc0, 0xae, 0x0a]
        do {
            _ = try AgentRules.parse(bytes)
            Issue.record("parsed bytes that are not UTF-8")
        } catch {
            #expect(error.line == 3)
        }
        // A tab is a space.
        #expect(Self.line(of: "rule a\n\tuid\t1\n\tallow\ttoken *\n") == nil)
    }

    @Test("a rule with no condition is an error on its rule line; any-caller says so, and stands alone")
    func conditionRequired() throws {
        #expect(Self.line(of: "rule all\n    allow token *\n") == 1)
        #expect(Self.line(of: "rule a\n  uid 1\n  allow status\n\n# next\nrule b\n  allow list\n") == 6)
        #expect(Self.line(of: "rule empty\nrule b\n  uid 1\n") == 1)
        #expect(Self.line(of: "rule a\n  any-caller\n  uid 1\n") == 3)
        #expect(Self.line(of: "rule a\n  uid 1\n  any-caller\n") == 3)
        #expect(Self.line(of: "rule a\n  any-caller x\n") == 2)
        let everyone = try AgentRules.parse("rule everyone\n    any-caller\n    allow status\n".utf8)
        #expect(everyone.rules.first?.anyCaller == true)
        #expect(everyone.decide(.status, for: Self.sandbox, on: .restricted, agentUID: 1000).allowed)
        #expect(!everyone.decide(.token(environment: "e"), for: Self.sandbox, on: .main, agentUID: 1000).allowed)
        // A rule made without conditions, and without any-caller, matches no one.
        let bare = AgentRules(rules: [AgentRules.Rule(name: "bare", grants: [.token(["*"])])])
        #expect(!bare.decide(.token(environment: "e"), for: Self.sandbox, on: .restricted, agentUID: 1000).allowed)
    }
}
