import Foundation
@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// A session bus with a Secret Service provider on it, unlocked, whatever its address says.
final class FakeSessionBus: SessionBusConnection {
    let id: String
    init(id: String = "5f3c2a0d9e8b4c1a8f7e6d5c4b3a2910") { self.id = id }
    func hasSecretServiceProvider() throws(StoreError) -> Bool { true }
    func isDefaultCollectionLocked() throws(StoreError) -> Bool { false }
    func busID() throws(StoreError) -> String { id }
    func unlockedSecretServiceItems(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem]? { nil }
}

/// The session's copy in the kernel keyring is one per store, named after what the store is:
/// however the backend, the file or the bus was spelled, ending the session under one spelling
/// leaves nothing that another spelling could still serve (docs/storage.md, "The session cache").
@Suite("session copies in-process")
struct SessionCopyTests {
    /// Two ways of reaching one store, as a git helper line and a script might spell them.
    struct Spellings: CustomTestStringConvertible, Sendable {
        let name: String
        let hasBus: Bool
        let first: [String: String]
        let second: [String: String]
        var testDescription: String { name }
    }

    static let bus = "unix:path=/run/user/1000/bus"
    static let spellings: [Spellings] = [
        Spellings(
            name: "auto, then --backend secret-service", hasBus: true, first: [:],
            second: ["PORTAL_TOKEN_BACKEND": "secret-service"]),
        Spellings(
            name: "secret-service, then auto", hasBus: true, first: ["PORTAL_TOKEN_BACKEND": "secret-service"],
            second: [:]),
        Spellings(
            name: "one bus at two addresses", hasBus: true, first: ["DBUS_SESSION_BUS_ADDRESS": bus],
            second: ["DBUS_SESSION_BUS_ADDRESS": bus + ",guid=5f3c2a0d9e8b4c1a8f7e6d5c4b3a2910"]),
        Spellings(
            name: "file, then auto without a bus", hasBus: false, first: ["PORTAL_TOKEN_BACKEND": "file"],
            second: [:]),
        Spellings(
            name: "one file by two paths", hasBus: false, first: ["PORTAL_TOKEN_FILE": "data/portal-token/store"],
            second: ["PORTAL_TOKEN_FILE": "data/./portal-token//store"]),
    ]

    static func cli(_ spellings: Spellings, status: Int) throws -> InProcessCLI {
        let cli = try InProcessCLI(transport: ScriptedTransport(status: status))
        if spellings.hasBus { cli.bus = FakeSessionBus() }
        try FileManager.default.createDirectory(
            atPath: cli.directory + "/data/portal-token", withIntermediateDirectories: true)
        return cli
    }

    /// A relative store path is taken from the test's directory.
    static func environment(_ changes: [String: String], _ cli: InProcessCLI) -> [String: String] {
        changes.mapValues { $0.hasPrefix("data/") ? cli.directory + "/" + $0 : $0 }
    }

    @Test("a 401 under one spelling ends the session for every spelling", arguments: spellings)
    func unauthorizedUnderAnother(spellings: Spellings) throws {
        let cli = try Self.cli(spellings, status: 401)
        try cli.signIn(token: "tok-old")
        let first = Self.environment(spellings.first, cli), second = Self.environment(spellings.second, cli)
        let served = cli.run(["token"], environment: first)
        #expect(served.exitCode == 0 && served.stdout == "tok-old\n", "\(served.stderr)")
        #expect(cli.cache.names.count == 1)

        let ended = cli.run(["api", "/api/v3/clients/me"], environment: second)
        #expect(ended.exitCode == 3, "\(ended.stderr)")
        #expect(cli.endedEndUsers == ["user-1"])

        let after = cli.run(["token"], environment: first)
        #expect(after.exitCode == 1, "the ended session's token was served: \(after.stdout)")
        #expect(!after.stdout.contains("tok-old"))
        #expect(cli.cache.names.isEmpty)
    }

    @Test("a logout under one spelling leaves no copy for another to serve", arguments: spellings)
    func logoutUnderAnother(spellings: Spellings) throws {
        let cli = try Self.cli(spellings, status: 200)
        try cli.signIn(token: "tok-old")
        let first = Self.environment(spellings.first, cli), second = Self.environment(spellings.second, cli)
        #expect(cli.run(["token"], environment: first).stdout == "tok-old\n")
        // Both spellings read one copy: the second is a hit on the first's.
        #expect(cli.run(["token"], environment: second).stdout == "tok-old\n")
        #expect(cli.cache.names.count == 1)

        let logout = cli.run(["logout"], environment: second)
        #expect(logout.exitCode == 0, "\(logout.stderr)")
        let after = cli.run(["token"], environment: first)
        #expect(after.exitCode == 1, "the logged-out session's token was served: \(after.stdout)")
        #expect(cli.hookRuns.value.isEmpty)
    }
}
