import Foundation
@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// What the error funnel records for each outcome, and what `portal-token audit` shows, in-process.
@Suite("the audit line of each outcome, and the audit command")
struct AuditTests {
    /// The one event a run recorded.
    static func only(_ cli: InProcessCLI, sourceLocation: SourceLocation = #_sourceLocation) throws -> AuditEvent {
        let events = cli.audit.events.value
        #expect(events.count == 1, sourceLocation: sourceLocation)
        return try #require(events.last, sourceLocation: sourceLocation)
    }

    @Test("a token handed out names its environment, end user and token, in the XDG state directory")
    func served() throws {
        let cli = try InProcessCLI()
        try cli.signIn(token: "token-1", endUserID: "user-1")
        #expect(cli.run(["token"]).exitCode == 0)
        let event = try Self.only(cli)
        #expect(event.operation == .token && event.outcome == .served && event.exitCode == 0)
        #expect(event.authEnvironmentID == InProcessCLI.environmentID && event.endUserID == "user-1")
        #expect(event.token == Secret("token-1"))
        #expect(event.caller == nil, "the writer fills in its own process")
        #expect(cli.audit.options.value == [cli.directory + "/.local/state/portal-token"])
        #expect(
            cli.run(["token"], environment: ["XDG_STATE_HOME": "/elsewhere"]).exitCode == 0
                && cli.audit.options.value.last == "/elsewhere/portal-token")
    }

    @Test("the 7-day cap: expired, and the run that ended the session says so")
    func expired() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        cli.clock.update { $0 += PortalSession.lifetimeCap + 1 }
        #expect(cli.run(["token"]).exitCode == 3)
        let event = try Self.only(cli)
        #expect(event.outcome == .expired && event.endedSession && event.exitCode == 3)
        #expect(event.token == Secret("token-1"))
    }

    @Test("a 401 from Portal is unauthorized; git's erase with the token is invalidated")
    func sessionEnds() throws {
        let cli = try InProcessCLI(transport: ScriptedTransport(status: 401))
        try cli.signIn()
        #expect(cli.run(["api", "/api/v3/clients/me"]).exitCode == 3)
        #expect(try Self.only(cli).outcome == .unauthorized && Self.only(cli).endedSession)

        let git = try InProcessCLI()
        try git.signIn(token: "token-1")
        let origin = "protocol=https\nhost=api.portalhq.io\n"
        #expect(git.run(["erase"], stdin: origin + "username=user-1\npassword=token-1\n").exitCode == 3)
        let event = try Self.only(git)
        #expect(event.operation == .erase && event.outcome == .invalidated && event.endedSession)
        #expect(event.host == "api.portalhq.io" && event.protocolName == "https")
    }

    @Test("Portal unreachable, a store that is locked, and no session have outcomes of their own")
    func failures() throws {
        let unreachable = try InProcessCLI(
            transport: ScriptedTransport { _ throws(HTTPError) in throw .cannotConnect(host: "api.portalhq.io") })
        try unreachable.signIn()
        #expect(unreachable.run(["refresh"]).exitCode == 5)
        #expect(try Self.only(unreachable).outcome == .unreachable)

        final class LockedStore: ForwardingItemStore, @unchecked Sendable {
            override func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
                throw StoreError(.locked, "the default keyring is locked")
            }
        }
        let locked = try InProcessCLI()
        locked.store = LockedStore(locked.items)
        #expect(locked.run(["get"], stdin: "protocol=https\nhost=example.com\n").exitCode == 4)
        let event = try Self.only(locked)
        #expect(event.outcome == .locked && event.host == "example.com" && event.authEnvironmentID == nil)

        let nobody = try InProcessCLI()
        #expect(nobody.run(["token"]).exitCode == 1)
        #expect(try Self.only(nobody).outcome == .notSignedIn)
        #expect(try Self.only(nobody).authEnvironmentID == InProcessCLI.environmentID)
    }

    @Test("api records the method and Portal's status; a refusal is rejected")
    func apiStatus() throws {
        let cli = try InProcessCLI(transport: ScriptedTransport(status: 403))
        try cli.signIn()
        #expect(cli.run(["api", "-X", "POST", "/api/v3/clients/me", "--data", "{}"]).exitCode == 6)
        let event = try Self.only(cli)
        #expect(event.method == "POST" && event.httpStatus == 403 && event.outcome == .rejected)
    }

    @Test("a usage error, help, and commands that hand out no credential record nothing")
    func nothingToRecord() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        for arguments in [["token", "--bogus"], ["token", "--help"], ["status"], ["list"], ["capability"], ["audit"]] {
            _ = cli.run(arguments)
        }
        #expect(cli.audit.events.value.isEmpty)
    }

    @Test("audit-log = off in the user's config file records nothing; a wrong value is a usage error")
    func turnedOff() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        try FileManager.default.createDirectory(
            atPath: cli.directory + "/config/portal-token", withIntermediateDirectories: true)
        try "audit-log = off\n".write(
            toFile: cli.directory + "/config/portal-token/config", atomically: false, encoding: .utf8)
        #expect(cli.run(["token"]).exitCode == 0)
        #expect(cli.audit.events.value.isEmpty)
        try "audit-log = maybe\n".write(
            toFile: cli.directory + "/config/portal-token/config", atomically: false, encoding: .utf8)
        let wrong = cli.run(["token"])
        #expect(wrong.exitCode == 2 && wrong.stderr.contains("audit-log in the config file must be on or off"))
    }

    @Test("exec records its program's name, without its directory or arguments, and no exit code")
    func execProgram() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        #expect(cli.run(["exec", "--", "/nonexistent/tool", "--password", "hunter2"]).exitCode == 127)
        let event = try Self.only(cli)
        #expect(event.operation == .exec && event.program == "tool" && event.exitCode == nil)
    }

    static func line(
        _ time: String, _ operation: String = "token", host: String? = nil, endUser: String = "user-1"
    ) -> String {
        let hostMember = host.map { #","host":"\#($0)""# } ?? ""
        return #"""
            {"time":"\#(time)","operation":"\#(operation)","outcome":"served","exitCode":0,\#
            "authEnvironmentId":"env-1",\#
            "endUserId":"\#(endUser)","tokenFingerprint":"0123456789abcdef"\#(hostMember),\#
            "caller":{"pid":42,"parents":["/usr/bin/git","/bin/bash"]}}
            """#
    }

    @Test("audit prints a table, oldest first, every cell escaped for the terminal; --since keeps the recent ones")
    func table() throws {
        let cli = try InProcessCLI()
        let now = InProcessCLI.issued
        cli.audit.storedLines.update {
            $0 = [
                Self.line(RFC3339.format(now - 7200).replacingOccurrences(of: "Z", with: ".000001Z")),
                "not json",
                Self.line(
                    RFC3339.format(now - 60).replacingOccurrences(of: "Z", with: ".5Z"), "get",
                    host: "evil\\u001b]0;owned\\u0007.example"),
            ]
        }
        let all = cli.run(["audit"])
        #expect(all.exitCode == 0, "\(all.stderr)")
        let rows = all.stdout.split(separator: "\n")
        #expect(rows.count == 3)
        #expect(rows[0].hasPrefix("TIME (UTC)") && rows[0].hasSuffix("CALLER"))
        #expect(rows[1].hasPrefix(RFC3339.format(now - 7200).prefix(10) + " "))
        #expect(rows[1].contains("0123456789abcdef") && rows[1].contains(" 42 ") && rows[1].hasSuffix(" git"))
        #expect(rows[2].contains(#"evil\x1b]0;owned\x07.example"#), "\(rows[2])")
        #expect(!all.stdout.contains("\u{1b}") && !all.stdout.contains("\u{07}"))

        let recent = cli.run(["audit", "--since", "30m"])
        #expect(recent.stdout.split(separator: "\n").count == 2)
        let json = cli.run(["audit", "--since", "3h", "--format", "json"])
        #expect(json.stdout.split(separator: "\n").count == 2)
        #expect(json.stdout.hasPrefix(#"{"time":""#))
        #expect(cli.run(["audit", "--since", "1h", "--format", "json"]).stdout.split(separator: "\n").count == 1)
        let none = cli.run(["audit", "--since", "10s"])
        #expect(
            none.exitCode == 0 && none.stdout.isEmpty && none.stderr == "portal-token: no audit events in that time\n")
    }

    @Test("--since takes a number and a unit", arguments: ["", "30", "m", "-5m", "1w", "1.5h", "30 m"])
    func badDuration(text: String) throws {
        let result = try InProcessCLI().run(["audit", "--since", text])
        #expect(result.exitCode == 2 && result.stderr.contains("--since takes a duration such as 30m, 24h or 7d"))
    }
}
