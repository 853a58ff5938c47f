import PortalTokenCore
import Synchronization

/// Portal sessions in memory, with the same semantics as the real stores.
public final class InMemorySessionStore: SessionStore, Sendable {
    private let state = Mutex<[String: StoredSession]>([:])
    /// When set, every operation fails with it (a locked or dead store).
    public let failure = Mutex<StoreError?>(nil)

    public init() {}

    /// Puts an unreadable record in place, as another tool or a damaged item would.
    public func storeUnreadable(authEnvironmentID: String) {
        state.withLock { $0[authEnvironmentID] = .unreadable }
    }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        if let error = failure.withLock({ $0 }) { throw error }
        return state.withLock { $0[authEnvironmentID] ?? .absent }
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        if let error = failure.withLock({ $0 }) { throw error }
        state.withLock { $0[session.authEnvironmentID] = .present(session) }
    }

    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        if let error = failure.withLock({ $0 }) { throw error }
        return state.withLock { $0.removeValue(forKey: authEnvironmentID) != nil }
    }
}

/// A lock for one process: enough where the test drives one service at a time.
public final class InProcessSessionLock: SessionLock, Sendable {
    private let mutex = Mutex<Void>(())
    public init() {}
    public func withLock<Result>(_ body: () throws -> Result) throws -> Result {
        try mutex.withLock { _ in try body() }
    }
}

/// A transport that answers from a script and records what it was asked.
public final class ScriptedTransport: HTTPTransport, Sendable {
    private let answer: @Sendable (HTTPRequest) throws(HTTPError) -> HTTPResponse
    private let sent = Mutex<[HTTPRequest]>([])

    public init(_ answer: @escaping @Sendable (HTTPRequest) throws(HTTPError) -> HTTPResponse) {
        self.answer = answer
    }

    /// Answers every request with `status` (and an empty JSON object).
    public convenience init(status: Int) {
        self.init { request in HTTPResponse(status: status, body: Array("{}".utf8), effectiveURL: request.url) }
    }

    public var requests: [HTTPRequest] { sent.withLock { $0 } }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        sent.withLock { $0.append(request) }
        return try answer(request)
    }
}

/// A value shared between a test and the closures it hands out.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public var value: Value { mutex.withLock { $0 } }
    public func update<Result>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}

/// Two-factor steps in memory, with the same semantics as the real stores.
public final class InMemoryTwoFactorStepStore: TwoFactorStepStore, Sendable {
    private let state = Mutex<[String: PendingTwoFactor]>([:])
    /// When set, every operation fails with it.
    public let failure = Mutex<StoreError?>(nil)
    /// When set, saving fails with it (reads and deletes work).
    public let saveFailure = Mutex<StoreError?>(nil)

    public init() {}

    public func loadStep(authEnvironmentID: String) throws(StoreError) -> PendingTwoFactor? {
        if let error = failure.withLock({ $0 }) { throw error }
        return state.withLock { $0[authEnvironmentID] }
    }

    public func saveStep(_ step: PendingTwoFactor) throws(StoreError) {
        if let error = failure.withLock({ $0 }) ?? saveFailure.withLock({ $0 }) { throw error }
        state.withLock { $0[step.authEnvironmentID] = step }
    }

    public func deleteStep(authEnvironmentID: String) throws(StoreError) -> Bool {
        if let error = failure.withLock({ $0 }) { throw error }
        return state.withLock { $0.removeValue(forKey: authEnvironmentID) != nil }
    }
}

/// A secret cache that keeps nothing, as a kernel without keyrings.
public final class ForgetfulSecretCache: SecretCache, Sendable {
    public init() {}
    public func read(_ name: String) -> Secret? { nil }
    public func store(_ secret: Secret, as name: String, forSeconds seconds: Int) {}
    public func drop(_ name: String) {}
    public func dropAll(withPrefix prefix: String) {}
}

/// A store whose writes fail while `failing` is set, and whose reads always work: a keyring
/// that locks between the read and the write.
public final class WriteFailingSessionStore: SessionStore, Sendable {
    public let base = InMemorySessionStore()
    public let failing = Mutex<Bool>(false)
    public let writes = Mutex<Int>(0)

    public init() {}

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        try base.loadSession(authEnvironmentID: authEnvironmentID)
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        writes.withLock { $0 += 1 }
        if failing.withLock({ $0 }) { throw StoreError(.locked, "keyring 'Login' is locked", hint: "unlock it") }
        try base.saveSession(session)
    }

    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        try base.deleteSession(authEnvironmentID: authEnvironmentID)
    }
}

/// A secret cache in memory that records how long each entry was meant to live.
public final class InMemorySecretCache: SecretCache, Sendable {
    private let entries = Mutex<[String: (secret: Secret, seconds: Int)]>([:])
    public init() {}
    public var names: [String] { entries.withLock { Array($0.keys) } }
    public func lifetime(of name: String) -> Int? { entries.withLock { $0[name]?.seconds } }
    public func read(_ name: String) -> Secret? { entries.withLock { $0[name]?.secret } }
    public func store(_ secret: Secret, as name: String, forSeconds seconds: Int) {
        entries.withLock { $0[name] = (secret, seconds) }
    }
    public func drop(_ name: String) { _ = entries.withLock { $0.removeValue(forKey: name) } }
    public func dropAll(withPrefix prefix: String) {
        entries.withLock { entries in entries = entries.filter { !$0.key.hasPrefix(prefix) } }
    }
}
