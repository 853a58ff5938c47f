import PortalTokenCore
import Synchronization

/// A credential store in memory, with the same matching and ordering rules as the real ones.
/// It runs the store contract suite beside them, so the suite itself is checked.
public final class InMemoryCredentialStore: CredentialStore, Sendable {
    private struct Entry {
        var credential: Credential
        var sequence: Int
    }

    private let state = Mutex<(entries: [Entry], nextSequence: Int)>(([], 0))

    public init() {}

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        var query = query
        query.password = nil
        let entries = state.withLock { $0.entries }
        return entries.filter { query.matches($0.credential) }
            .sorted { $0.sequence > $1.sequence }
            .map(\.credential)
    }

    public func store(_ credential: Credential) throws(StoreError) {
        state.withLock { state in
            state.entries.removeAll { $0.credential.occupiesSameSlot(as: credential) }
            state.entries.append(Entry(credential: credential, sequence: state.nextSequence))
            state.nextSequence += 1
        }
    }

    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        state.withLock { state in
            let before = state.entries.count
            state.entries.removeAll { query.matches($0.credential) }
            return before - state.entries.count
        }
    }
}
