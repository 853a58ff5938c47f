import PortalTokenCore
import PortalTokenTestSupport
import Synchronization
import Testing

private let issued: Int64 = 1_700_000_000
private let hour: Int64 = 3600

/// A session service over in-memory parts, with a clock the test moves.
private final class Harness {
    let store = InMemoryItemStore()
    let transport: ScriptedTransport
    let clock = Locked<Int64>(issued)
    let ended = Locked<[SessionEndedEvent]>([])
    let warnings = Locked<[String]>([])
    let service: SessionService

    init(transport: ScriptedTransport = ScriptedTransport(status: 200), apiHost: String = "api.portalhq.io") throws {
        self.transport = transport
        let apiBase = try PortalAPIBase(apiHost: apiHost)
        let clock = self.clock, ended = self.ended, warnings = self.warnings
        service = SessionService(
            authEnvironmentID: "env-1", apiBase: apiBase, store: inMemorySessions(store), lock: InProcessSessionLock(),
            transport: transport,
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: "test"),
            sessionEnded: { event in ended.update { $0.append(event) } },
            warn: { line in warnings.update { $0.append(line) } },
            now: { clock.value })
    }

    func advance(_ seconds: Int64) { clock.update { $0 += seconds } }

    @discardableResult
    func signIn(token: String = "token-1") throws -> PortalSession {
        try service.adopt(token: Secret(token), endUserID: "user-1")
    }

    var stored: StoredSession { (try? Sessions(store).loadSession(authEnvironmentID: "env-1")) ?? .absent }
}

@Suite("session service")
struct SessionServiceTests {
    @Test("before expiresAt the token is handed out with no network call")
    func handsOutWithoutNetwork() throws {
        let harness = try Harness()
        try harness.signIn()
        harness.advance(23 * hour)
        #expect(try harness.service.usableSession().token == Secret("token-1"))
        #expect(harness.transport.requests.isEmpty)
    }

    @Test("past the idle window one /clients/me check decides; accepted slides the expiry")
    func checkAcceptedSlides() throws {
        let harness = try Harness()
        try harness.signIn()
        harness.advance(25 * hour)
        let session = try harness.service.usableSession()
        #expect(harness.transport.requests.count == 1)
        let request = try #require(harness.transport.requests.first)
        #expect(request.method == "GET" && request.url == "https://api.portalhq.io/api/v3/clients/me")
        #expect(request.authorization == Secret("Bearer token-1"))
        #expect(session.lastActivityAt == issued + 25 * hour)
        guard case .present(let stored) = harness.stored else { Issue.record("session was removed"); return }
        #expect(stored.expiresAt == issued + 49 * hour)
        // The slid expiry means the next call within the window needs no request.
        harness.advance(23 * hour)
        _ = try harness.service.usableSession()
        #expect(harness.transport.requests.count == 1)
    }

    @Test("past the idle window a 401 ends the session and runs the hook once, reason unauthorized")
    func checkRejectedEnds() throws {
        let harness = try Harness(transport: ScriptedTransport(status: 401))
        try harness.signIn()
        harness.advance(25 * hour)
        #expect(throws: SessionError.ended(reason: .unauthorized, endUserID: "user-1")) {
            try harness.service.usableSession()
        }
        #expect(harness.stored == .absent)
        #expect(
            harness.ended.value == [
                SessionEndedEvent(authEnvironmentID: "env-1", endUserID: "user-1", reason: .unauthorized)
            ])
    }

    @Test("past the idle window an unreachable Portal is a network error and the session is kept")
    func checkUnreachableKeeps() throws {
        let harness = try Harness(
            transport: ScriptedTransport { _ throws(HTTPError) in throw HTTPError.cannotConnect(host: "api.portalhq.io")
            })
        let session = try harness.signIn()
        harness.advance(25 * hour)
        #expect(throws: SessionError.network(.cannotConnect(host: "api.portalhq.io"))) {
            try harness.service.usableSession()
        }
        #expect(harness.stored == .present(session))
        #expect(harness.ended.value.isEmpty)
    }

    @Test("a 5xx on the expiry check keeps the session and hands nothing out")
    func checkServerErrorKeeps() throws {
        let harness = try Harness(transport: ScriptedTransport(status: 503))
        let session = try harness.signIn()
        harness.advance(25 * hour)
        #expect(throws: SessionError.checkFailed(status: 503)) { try harness.service.usableSession() }
        #expect(harness.stored == .present(session))
    }

    @Test("at the 7-day cap the session ends locally, reason expired, with no network call")
    func capEndsLocally() throws {
        let harness = try Harness()
        try harness.signIn()
        harness.advance(7 * 24 * hour)
        #expect(throws: SessionError.ended(reason: .expired, endUserID: "user-1")) {
            try harness.service.usableSession()
        }
        #expect(harness.transport.requests.isEmpty)
        #expect(harness.ended.value.map(\.reason) == [.expired])
        #expect(harness.stored == .absent)
    }

    @Test("a 401 from api ends the session; other statuses come back as they are")
    func apiStatuses() throws {
        let status = Locked(404)
        let harness = try Harness(
            transport: ScriptedTransport { request in
                HTTPResponse(status: status.value, body: Array("{}".utf8), effectiveURL: request.url)
            })
        try harness.signIn()
        #expect(try harness.service.api(method: "GET", path: "/api/v3/x", body: nil).status == 404)
        #expect(harness.ended.value.isEmpty)
        status.update { $0 = 401 }
        #expect(throws: SessionError.ended(reason: .unauthorized, endUserID: "user-1")) {
            try harness.service.api(method: "GET", path: "/api/v3/x", body: nil)
        }
        #expect(harness.ended.value.count == 1)
    }

    @Test("api slides the expiry on 2xx")
    func apiSlides() throws {
        let harness = try Harness()
        try harness.signIn()
        harness.advance(10 * hour)
        _ = try harness.service.api(method: "POST", path: "/api/v3/x", body: Array("{}".utf8))
        guard case .present(let stored) = harness.stored else { Issue.record("no session"); return }
        #expect(stored.lastActivityAt == issued + 10 * hour)
    }

    @Test("activity within a minute of the recorded activity is not written again")
    func activityRecordingInterval() throws {
        let harness = try Harness()
        try harness.signIn()
        harness.advance(30)
        _ = try harness.service.api(method: "GET", path: "/api/v3/x", body: nil)
        guard case .present(let unchanged) = harness.stored else { Issue.record("no session"); return }
        #expect(unchanged.lastActivityAt == issued)
        harness.advance(31)
        _ = try harness.service.api(method: "GET", path: "/api/v3/x", body: nil)
        guard case .present(let recorded) = harness.stored else { Issue.record("no session"); return }
        #expect(recorded.lastActivityAt == issued + 61)
    }

    @Test(
        "the session token goes to the configured API origin only",
        arguments: [
            "https://evil.example/api", "//evil.example/x", "https://api.portalhq.io.evil.example/x",
            "http://api.portalhq.io/x",
            "api/v3/clients/me",
        ])
    func foreignOrigins(path: String) throws {
        let harness = try Harness()
        try harness.signIn()
        #expect(throws: SessionError.foreignOrigin) { try harness.service.api(method: "GET", path: path, body: nil) }
        #expect(harness.transport.requests.isEmpty)
    }

    @Test("an absolute URL on the configured API host is allowed")
    func absoluteOnAPIHost() throws {
        let harness = try Harness()
        try harness.signIn()
        _ = try harness.service.api(method: "GET", path: "https://API.portalhq.io/api/v3/clients/me", body: nil)
        #expect(harness.transport.requests.count == 1)
    }

    @Test("compare-and-delete: ending an old token never removes a newer session")
    func newerSessionSurvives() throws {
        let harness = try Harness()
        try harness.signIn(token: "old")
        let newer = try harness.signIn(token: "new")
        #expect(try harness.service.invalidate(token: Secret("old")) == nil)
        #expect(harness.stored == .present(newer))
        #expect(harness.ended.value.isEmpty)
        #expect(try harness.service.invalidate(token: Secret("new"))?.endUserID == "user-1")
        #expect(harness.stored == .absent)
        #expect(harness.ended.value.count == 1)
    }

    @Test("approve with the same token slides; with another token adopts it")
    func approve() throws {
        let harness = try Harness()
        try harness.signIn(token: "t1")
        harness.advance(hour)
        try harness.service.approve(token: Secret("t1"), endUserID: "user-1")
        guard case .present(let slid) = harness.stored else { Issue.record("no session"); return }
        #expect(slid.lastActivityAt == issued + hour && slid.issuedAt == issued)
        try harness.service.approve(token: Secret("t2"), endUserID: "user-2")
        guard case .present(let adopted) = harness.stored else { Issue.record("no session"); return }
        #expect(adopted.token == Secret("t2") && adopted.endUserID == "user-2" && adopted.issuedAt == issued + hour)
    }

    @Test("restore: absent is not signed in; no request is made")
    func restoreAbsent() throws {
        let harness = try Harness()
        #expect(throws: SessionError.notSignedIn(authEnvironmentID: "env-1")) { try harness.service.usableSession() }
        #expect(harness.transport.requests.isEmpty)
    }

    @Test("restore: an unreadable entry is cleared with a warning that never shows it")
    func restoreUnreadable() throws {
        let harness = try Harness()
        try harness.store.storeUnreadableSession(authEnvironmentID: "env-1")
        #expect(try harness.service.restore() == nil)
        #expect(harness.stored == .absent)
        #expect(
            harness.warnings.value == [
                "the stored Portal session for environment 'env-1' could not be read and was removed"
            ])
    }

    @Test("restore: a storage failure is thrown and nothing is deleted")
    func restoreTransientFailure() throws {
        let harness = try Harness()
        let session = try harness.signIn()
        harness.store.failure.withLock { $0 = StoreError(.locked, "keyring 'Login' is locked") }
        #expect(throws: StoreError(.locked, "keyring 'Login' is locked")) { try harness.service.usableSession() }
        harness.store.failure.withLock { $0 = nil }
        #expect(harness.stored == .present(session))
    }

    @Test("remove deletes without running the hook")
    func removeWithoutHook() throws {
        let harness = try Harness()
        try harness.signIn()
        #expect(try harness.service.remove())
        #expect(harness.ended.value.isEmpty)
        #expect(try harness.service.remove() == false)
    }
}
