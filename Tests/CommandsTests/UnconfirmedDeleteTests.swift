@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// A store whose deletes are not confirmed in time, as a keyring daemon that stalls once it has
/// the request: the delete happens (or not), then the caller hears a timeout that says the
/// deletion may still take effect.
final class UnconfirmedDeletes: ForwardingItemStore, @unchecked Sendable {
    enum Mode {
        /// Deletes, then times out.
        case afterDeleting
        /// Times out without deleting; the store answers again afterwards.
        case withoutDeleting
        /// Times out, and every later call times out too (the daemon is still stopped): whether
        /// it deleted cannot be known.
        case stalled
    }

    let mode: Mode
    private var stalled = false

    init(_ inner: InMemoryItemStore, mode: Mode) {
        self.mode = mode
        super.init(inner)
    }

    static let timeout = StoreError(
        .timedOut, "the Secret Service did not confirm a deletion within 800 ms: it may still take effect",
        outcomeUnknown: true)

    override func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        if stalled { throw StoreError(.timedOut, "the Secret Service did not answer within 800 ms") }
        return try inner.search(filters)
    }

    override func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        // Nothing to delete asks the store for nothing, so nothing can go unconfirmed.
        guard try !search(filters).filter(isDoomed).isEmpty else { return 0 }
        switch mode {
        case .afterDeleting:
            _ = try inner.delete(filters, where: isDoomed)
        case .withoutDeleting:
            break
        case .stalled:
            stalled = true
        }
        throw Self.timeout
    }
}

/// A delete the store does not confirm in time is looked at again before anything is said: gone
/// is a delete that happened (the hook runs, once); still there is an ordinary failure; unknown
/// is exit 4 that says the session may have been deleted, never that nothing was
/// (docs/sessions.md, "Ending a session").
@Suite("deletes the store does not confirm")
struct UnconfirmedDeleteTests {
    static func cli(_ mode: UnconfirmedDeletes.Mode, status: Int = 401) throws -> InProcessCLI {
        let cli = try InProcessCLI(transport: ScriptedTransport(status: status))
        try cli.signIn(token: "tok-ending")
        cli.store = UnconfirmedDeletes(cli.items, mode: mode)
        return cli
    }

    @Test("a 401 whose delete happened but was not confirmed ends the session: exit 3, the hook once")
    func unauthorizedDeleted() throws {
        let cli = try Self.cli(.afterDeleting)
        let result = cli.run(["api", "/api/v3/clients/me"])
        #expect(result.exitCode == 3, "\(result.stderr)")
        #expect(result.stderr.contains("the Portal session of user-1 has ended"))
        #expect(cli.storedSession == .absent)
        #expect(cli.endedEndUsers == ["user-1"])
        // Another process seeing the same 401 finds nothing to end, and runs no hook.
        cli.store = nil
        try cli.signIn(token: "tok-newer")
        _ = cli.run(["erase"], stdin: "protocol=https\nhost=api.portalhq.io\npassword=tok-ending\n")
        #expect(cli.endedEndUsers == ["user-1"])
    }

    @Test("a logout whose delete happened but was not confirmed signs out")
    func logoutDeleted() throws {
        let cli = try Self.cli(.afterDeleting, status: 200)
        let result = cli.run(["logout"])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stderr.contains("signed out of environment 'env-1'"))
        #expect(cli.hookRuns.value.isEmpty)
    }

    @Test("a delete that did not happen, as the store says once it answers again, is exit 4 and keeps the session")
    func notDeleted() throws {
        let cli = try Self.cli(.withoutDeleting)
        let result = cli.run(["api", "/api/v3/clients/me"])
        #expect(result.exitCode == 4, "\(result.stderr)")
        #expect(result.stderr.contains("still holds it"), "\(result.stderr)")
        #expect(cli.hookRuns.value.isEmpty)
        guard case .present = cli.storedSession else {
            Issue.record("the session is gone")
            return
        }
    }

    @Test("a delete whose outcome cannot be known is exit 4 that says it may have happened, and runs no hook")
    func unknown() throws {
        for arguments in [["api", "/api/v3/clients/me"], ["logout"]] {
            let cli = try Self.cli(.stalled)
            let result = cli.run(arguments)
            #expect(result.exitCode == 4, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("it may still take effect"), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("nothing was deleted"))
            #expect(cli.hookRuns.value.isEmpty)
        }
    }
}
