import PortalTokenCore
import Synchronization

/// Portal sessions over an in-memory item store, with no cache: what a service under test reads
/// and writes.
public func inMemorySessions(_ items: InMemoryItemStore) -> Sessions { Sessions(items) }

extension InMemoryItemStore {
    /// Puts an unreadable session record in place, as another tool or a damaged item would.
    public func storeUnreadableSession(authEnvironmentID: String) throws {
        try replace(
            [],
            with: StoredItem(
                attributes: [
                    StoredItem.schemaAttribute: SessionItems.schema, "auth-environment-id": authEnvironmentID,
                    "end-user-id": "user",
                ], label: "foreign", secret: Secret("not a session")))
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

/// A secret cache that keeps nothing, as a kernel without keyrings.
public final class ForgetfulSecretCache: SecretCache, Sendable {
    public init() {}
    public func read(_ name: String) -> Secret? { nil }
    public func store(_ secret: Secret, as name: String, idleSeconds: Int, maximumSeconds: Int) {}
    public func drop(_ name: String) {}
    public func dropAll(where isDropped: (String) -> Bool) {}
}

/// A secret cache in memory that records how long each entry was meant to live.
public final class InMemorySecretCache: SecretCache, Sendable {
    private let entries = Mutex<[String: (secret: Secret, idle: Int, maximum: Int)]>([:])
    public init() {}
    public var names: [String] { entries.withLock { Array($0.keys) } }
    /// How long the entry lives unused.
    public func lifetime(of name: String) -> Int? { entries.withLock { $0[name]?.idle } }
    /// How long the entry lives at most, however often it is used.
    public func maximumLifetime(of name: String) -> Int? { entries.withLock { $0[name]?.maximum } }
    public func read(_ name: String) -> Secret? { entries.withLock { $0[name]?.secret } }
    public func store(_ secret: Secret, as name: String, idleSeconds: Int, maximumSeconds: Int) {
        entries.withLock { $0[name] = (secret, idleSeconds, maximumSeconds) }
    }
    public func drop(_ name: String) { _ = entries.withLock { $0.removeValue(forKey: name) } }
    public func dropAll(where isDropped: (String) -> Bool) {
        entries.withLock { entries in entries = entries.filter { !isDropped($0.key) } }
    }
}
