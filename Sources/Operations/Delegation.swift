import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// What the proxies know of delegated credentials beyond what a credential says itself
/// (docs/delegation.md, "The registry"): each one minted or seen, with its parent, expiry and
/// scope, whether it was revoked and how often it was used. One JSON file,
/// `$XDG_STATE_HOME/portal-token/delegations.json`, in the user's private state directory,
/// replaced whole under its own lock; it holds ids, never a credential. A proxy reads it again
/// only when the file changed, so a revocation reaches every proxy by its next request.
package final class DelegationRegistry: @unchecked Sendable {
    package struct Entry: Sendable, Equatable {
        package var id: String
        /// The credential it was derived from; nil for a root.
        package var parent: String?
        package var environment: String?
        /// `delegate`, `exec --proxy`, or `derived` for one a holder made and a proxy first saw.
        package var origin: String
        package var issued: Int64
        package var expires: Int64
        /// What its own caveats allow, in their words; never secret.
        package var scope: String
        package var revoked = false
        package var used = 0
    }

    package let path: String
    private let lock: SessionFileLock
    private let cache = Mutex<(version: FileVersion?, entries: [String: Entry])?>(nil)
    /// One change at a time within the process (the proxy serves each connection on a thread of
    /// its own; the file lock keeps other processes out, not other threads).
    private let changing = Mutex(())

    package init(context: Context) {
        path = context.xdgDirectory("XDG_STATE_HOME", default: ".local/state") + "/portal-token/delegations.json"
        lock = SessionFileLock(context: context, timeoutMilliseconds: 5000, name: "delegations.lock")
    }

    private var directory: String { String(path[..<path.lastIndex(of: "/")!]) }

    /// The entries as the file holds them now; none when there is no file.
    package func entries() throws(StoreError) -> [String: Entry] {
        let version = FileVersion.of(path)
        if let cached = cache.withLock({ $0 }), cached.version == version { return cached.entries }
        let entries = try read()
        cache.withLock { $0 = (version, entries) }
        return entries
    }

    private func read() throws(StoreError) -> [String: Entry] {
        do {
            try PrivateDirectory.check(directory)
        } catch .cannotExamine(errno: ENOTDIR) {
            // A path through a file: no registry is there, nor can one be written.
            return [:]
        } catch {
            throw StoreError(
                error, "the state directory \(directory)", ownerHint: "set XDG_STATE_HOME to a directory of your own",
                modeHint: "restrict it with 'chmod go-w \(directory)'")
        }
        let bytes: [UInt8]
        do {
            bytes = try FileReading.contents(of: path, ownOnly: true)
        } catch {
            if error == .missing { return [:] }
            throw StoreError(.failed, "cannot read the delegation registry \(path): \(error.reason)")
        }
        guard let value = try? JSONValue.parse(bytes), let list = value["credentials"]?.arrayValue else {
            throw StoreError(
                .failed, "the delegation registry \(path) is damaged",
                hint: "remove it to forget every delegated credential (each one is then refused)")
        }
        var entries: [String: Entry] = [:]
        for item in list {
            guard let id = item["id"]?.stringValue, let issued = item["issued"]?.int64Value,
                let expires = item["expires"]?.int64Value
            else {
                // Dropping it would drop a revocation at the next write.
                throw StoreError(
                    .failed, "the delegation registry \(path) is damaged: an entry has no id, issue or expiry time",
                    hint: "remove it to forget every delegated credential (each one is then refused)")
            }
            entries[id] = Entry(
                id: id, parent: item["parent"]?.stringValue, environment: item["environment"]?.stringValue,
                origin: item["origin"]?.stringValue ?? "", issued: issued, expires: expires,
                scope: item["scope"]?.stringValue ?? "", revoked: item["revoked"]?.boolValue ?? false,
                used: Int(item["used"]?.int64Value ?? 0))
        }
        return entries
    }

    /// Changes the entries under the lock and writes them back, dropping those expired before
    /// `now`. Returns what `change` returns.
    @discardableResult
    package func update<Result>(now: Int64, _ change: (inout [String: Entry]) throws -> Result) throws -> Result {
        var outcome: Swift.Result<Result, any Error>?
        changing.withLock { _ in outcome = Swift.Result { try changeUnderLock(now: now, change) } }
        return try outcome!.get()
    }

    private func changeUnderLock<Result>(now: Int64, _ change: (inout [String: Entry]) throws -> Result) throws
        -> Result
    {
        try lock.withLock {
            do throws(SystemCallError) {
                try Directories.create(directory)
            } catch {
                throw StoreError(.failed, "cannot create \(error.path): \(error.reason)")
            }
            var entries = try read()
            let result = try change(&entries)
            entries = entries.filter { $0.value.expires > now }
            try write(entries)
            cache.withLock { $0 = nil }
            return result
        }
    }

    private func write(_ entries: [String: Entry]) throws(StoreError) {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("credentials")
        writer.beginArray()
        for entry in entries.values.sorted(by: { ($0.issued, $0.id) < ($1.issued, $1.id) }) {
            writer.beginObject()
            writer.key("id")
            writer.string(entry.id)
            if let parent = entry.parent {
                writer.key("parent")
                writer.string(parent)
            }
            if let environment = entry.environment {
                writer.key("environment")
                writer.string(environment)
            }
            for (key, value) in [("origin", entry.origin), ("scope", entry.scope)] {
                writer.key(key)
                writer.string(value)
            }
            for (key, value) in [("issued", entry.issued), ("expires", entry.expires), ("used", Int64(entry.used))] {
                writer.key(key)
                writer.number(value)
            }
            writer.key("revoked")
            writer.bool(entry.revoked)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        do {
            try AtomicFile.replace(path, with: writer.bytes + [0x0A], temporaryPrefix: ".delegations.json.")
        } catch {
            throw StoreError(.failed, "cannot write the delegation registry \(path): \(error.reason)")
        }
    }

    /// The entry one link of a credential's chain makes.
    package static func entry(
        for link: DelegatedCredential.Link, origin: String, environment: String?, now: Int64
    ) -> Entry {
        let scope = link.caveats.filter {
            if case .expires = $0 { return false }
            return true
        }
        return Entry(
            id: link.id, parent: link.parent, environment: environment, origin: origin, issued: now,
            expires: link.expires ?? now, scope: scope.map(\.line).joined(separator: "; "))
    }

    /// Whether the proxy may serve a credential whose signature and caveats passed: none of its
    /// chain revoked, its root listed when `listedRoot` asks it, and each use it counts within
    /// its bound (counted here). A derived credential seen for the first time is listed. Returns
    /// the reason for a refusal; nil to serve.
    ///
    /// A registry that cannot be written refuses a credential that counts its uses; one that only
    /// goes unlisted is served (listing is for `delegations`, the checks are the read's).
    package func admit(
        _ credential: DelegatedCredential, uses: [String: Int], listedRoot: Bool, environment: String?, now: Int64
    ) throws -> String? {
        let links = credential.links
        func refusal(_ entries: [String: Entry]) -> String? {
            if let revoked = links.first(where: { entries[$0.id]?.revoked == true }) {
                return "the delegated credential \(revoked.id) was revoked"
            }
            if listedRoot, let root = links.first, entries[root.id] == nil {
                return "the delegated credential \(root.id) is not in this user's registry (revoked by its removal)"
            }
            // An id is the holder's choice below the root: one that names another credential is
            // refused, so no one can spend another's uses or hide behind its id.
            if Set(links.map(\.id)).count != links.count {
                return "the delegated credential's chain names one id twice"
            }
            if let taken = links.first(where: { link in entries[link.id].map { $0.parent != link.parent } ?? false }) {
                return "the delegated credential's id \(taken.id) is another credential's"
            }
            return nil
        }
        let known = try entries()
        if let refused = refusal(known) { return refused }
        guard !uses.isEmpty || links.contains(where: { known[$0.id] == nil }) else { return nil }
        do {
            return try update(now: now) { entries -> String? in
                // Read again under the lock: a revocation or another use may have come meanwhile.
                if let refused = refusal(entries) { return refused }
                for link in links where entries[link.id] == nil {
                    entries[link.id] = Self.entry(
                        for: link, origin: link.parent == nil ? "exec --proxy" : "derived", environment: environment,
                        now: now)
                }
                if let (id, limit) = uses.first(where: { (entries[$0.key]?.used ?? 0) >= $0.value }) {
                    return "the delegated credential \(id) has made its \(limit) requests"
                }
                for link in uses.keys { entries[link]?.used += 1 }
                return nil
            }
        } catch {
            guard uses.isEmpty else { throw error }
            return nil
        }
    }
}

/// `delegate`: a credential for the proxy narrower than the session, minted under the session's
/// root key and listed in the registry, or derived offline from one the caller holds
/// (docs/delegation.md).
package enum Delegate {
    /// The longest a credential may live: a session's own cap.
    package static let maximumLifetime = PortalSession.lifetimeCap

    package struct Request {
        /// Seconds from now; required for a new credential, optional for a derived one.
        package var lifetime: Int64?
        package var methods: [String] = []
        package var paths: [String] = []
        package var callers: [AgentRules.Condition] = []
        package var uses: Int?
        /// The credential to derive from, without the agent or the session; nil mints one.
        package var parent: DelegatedCredential?

        package init() {}
    }

    package static func run(_ request: Request, _ context: Context) throws -> DelegatedCredential {
        let now = context.now()
        var caveats: [DelegatedCredential.Caveat] = []
        if let lifetime = request.lifetime { caveats.append(.expires(now + lifetime)) }
        if !request.methods.isEmpty { caveats.append(.methods(request.methods)) }
        if !request.paths.isEmpty { caveats.append(.paths(request.paths)) }
        caveats += request.callers.map(DelegatedCredential.Caveat.caller)
        if let uses = request.uses { caveats.append(.uses(uses)) }
        let id = DelegatedCredential.makeID()
        if let parent = request.parent {
            if let expires = parent.expires, expires <= now {
                throw CLIError("the credential to derive from expired", exitCode: .usage)
            }
            return parent.narrowed(id: id, by: caveats)
        }
        guard request.lifetime != nil else {
            throw CLIError.usage("delegate needs --ttl DURATION, at most 7d")
        }
        let service = try context.sessionService()
        let session = try service.usableSession()
        caveats.insert(.environment(session.authEnvironmentID), at: 1)
        let credential = DelegatedCredential.mint(
            key: DelegatedCredential.rootKey(of: session), id: id, caveats: caveats)
        let registry = DelegationRegistry(context: context)
        try registry.update(now: now) { entries in
            entries[id] = DelegationRegistry.entry(
                for: credential.links[0], origin: "delegate", environment: session.authEnvironmentID, now: now)
        }
        return credential
    }
}

/// `delegations`: the credentials the registry lists, and revocation by id.
package enum Delegations {
    /// The live ones, the oldest first.
    package static func list(_ context: Context) throws -> [DelegationRegistry.Entry] {
        let now = context.now()
        return try DelegationRegistry(context: context).entries().values.filter { $0.expires > now }
            .sorted { ($0.issued, $0.id) < ($1.issued, $1.id) }
    }

    /// Revokes `id`, and so every credential derived from it; false when the registry did not list
    /// it (a derived one no proxy has seen yet), which is then listed revoked for as long as any
    /// credential may live.
    package static func revoke(_ id: String, _ context: Context) throws -> Bool {
        let now = context.now()
        return try DelegationRegistry(context: context).update(now: now) { entries in
            let listed = entries[id] != nil
            entries[
                id,
                default: .init(
                    id: id, origin: "revoked before it was seen", issued: now, expires: now + Delegate.maximumLifetime,
                    scope: "")
            ].revoked = true
            return listed
        }
    }
}
