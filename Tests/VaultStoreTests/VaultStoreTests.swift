import Basics
import Foundation
import PortalHTTP
import PortalTokenCore
import PortalTokenTestSupport
import Testing

@testable import VaultStore

/// A Vault store on the suite's OpenBao server, under `prefix`, with the token from `tokenFile`
/// (the root token when nil).
func openVaultStore(prefix: String, tokenFile: String? = nil) throws -> VaultItemStore {
    let options = VaultOptions(
        address: try OpenBaoServer.address, pathPrefix: prefix,
        token: .file(try tokenFile ?? OpenBaoServer.rootTokenFile),
        http: HTTPTransportOptions(caBundlePath: try OpenBaoServer.caFile))
    return VaultItemStore(
        options: options, transport: CurlTransport(options: options.http), environment: { _ in nil },
        monotonicNow: { MonotonicClock.nanoseconds() / 1_000_000_000 })
}

/// The contracts every store keeps, against a real OpenBao server over verified TLS.
@Suite("item-store, credential and record contracts on OpenBao")
struct VaultStoreContractTests {
    @Test("the Vault store keeps the item-store contract", arguments: ItemStoreContract.checks)
    func items(check: ItemStoreContractCheck) throws {
        let prefix = OpenBaoServer.freshPrefix()
        try check.run(
            on: ContractStore(try openVaultStore(prefix: prefix), another: { try! openVaultStore(prefix: prefix) }))
    }

    @Test("git credentials keep their contract in the Vault store", arguments: CredentialContract.checks)
    func credentials(check: CredentialContractCheck) throws {
        try check.run(on: try openVaultStore(prefix: OpenBaoServer.freshPrefix()))
    }

    @Test("the Vault store keeps the session and two-factor step contract", arguments: RecordContract.checks)
    func records(check: RecordContractCheck) throws {
        try check.run(on: try openVaultStore(prefix: OpenBaoServer.freshPrefix()))
    }
}

private func item(_ attributes: ItemAttributes, secret: String) -> StoredItem {
    var attributes = attributes
    attributes[StoredItem.schemaAttribute] = "io.portalhq.PortalToken.VaultTest"
    return StoredItem(attributes: attributes, label: "a label", secret: Secret(secret))
}

private let everything: [ItemAttributes] = [[StoredItem.schemaAttribute: "io.portalhq.PortalToken.VaultTest"]]

@Suite("the Vault store's layout and check-and-set")
struct VaultStoreLayoutTests {
    @Test("an item lives at the hash of its attributes; its metadata names them and never the secret")
    func layout() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let store = try openVaultStore(prefix: prefix)
        try store.replace(everything, with: item(["k": "v"], secret: "the-secret-value"))
        let path = store.path(for: item(["k": "v"], secret: "").attributes)
        #expect(path.hasPrefix(prefix + "/io.portalhq.PortalToken.VaultTest/"))
        #expect(path.split(separator: "/").last?.count == 64)
        #expect(try store.search(everything).map(\.id) == [path])
        let metadata = try OpenBaoServer.bao(["kv", "metadata", "get", "-format=json", "-mount=secret", path])
        #expect(metadata.stdout.contains("\"max_versions\": 1"))
        #expect(metadata.stdout.contains("io.portalhq.PortalToken.VaultTest"))
        #expect(!metadata.stdout.contains("the-secret-value"))
        let data = try OpenBaoServer.bao(["kv", "get", "-format=json", "-mount=secret", path])
        #expect(data.stdout.contains("the-secret-value"))
    }

    @Test("a removal based on a version another host replaced removes nothing")
    func staleRemoval() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let mine = try openVaultStore(prefix: prefix), theirs = try openVaultStore(prefix: prefix)
        try mine.replace(everything, with: item(["k": "1"], secret: "old"))
        let seen = try #require(try mine.found(everything).first)
        try theirs.replace(everything, with: item(["k": "1"], secret: "new"))
        #expect(try mine.remove(seen, while: { $0.secret == Secret("old") }) == false)
        #expect(try mine.search(everything).map(\.secret.text) == ["new"])
        // Accepting what is there now, the removal reads again and goes through.
        #expect(try mine.remove(seen, while: { _ in true }) == true)
        #expect(try theirs.search(everything).isEmpty)
    }

    @Test("a conditional write loses to a removal made between its check and its write, and writes nothing")
    func conditionalWriteAfterRemoval() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let mine = try openVaultStore(prefix: prefix), theirs = try openVaultStore(prefix: prefix)
        try mine.replace(everything, with: item(["k": "1"], secret: "token"))
        var checks = 0
        let written = try mine.replace(
            everything,
            ifNewest: { newest in
                checks += 1
                // The other host removes the item after this host's check, before its write.
                if checks == 1 { #expect((try? theirs.delete(everything)) == 1) }
                return newest?.secret == Secret("token")
            }, where: { _ in true }, with: item(["k": "1"], secret: "token"))
        #expect(written == false)
        #expect(checks == 2)
        #expect(try theirs.search(everything).isEmpty)
    }

    @Test("a session another host removes between this host's read and its slide stays removed")
    func slideAfterRemoval() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let hostB = Sessions(try openVaultStore(prefix: prefix))
        let token = Secret("portal-session-token")
        let issued: Int64 = 1_700_000_000
        let hostAItems = Interleaving(try openVaultStore(prefix: prefix))
        let apiBase = try PortalAPIBase(apiHost: "api.portalhq.io")
        let hostA = SessionService(
            authEnvironmentID: "env-1", apiBase: apiBase, store: Sessions(hostAItems), lock: InProcessSessionLock(),
            transport: ScriptedTransport(status: 200),
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: "test"),
            sessionEnded: { _ in }, warn: { _ in }, now: { issued + 3600 })
        try hostB.saveSession(
            PortalSession(
                token: token, endUserID: "user-1", authEnvironmentID: "env-1", issuedAt: issued, lastActivityAt: issued)
        )
        // Host A has read the session and is about to record that Portal accepted its token; host
        // B hears a 401 for the same token just then and removes it.
        hostAItems.beforeWriting = {
            #expect((try? hostB.deleteSession(authEnvironmentID: "env-1", holding: token)) == true)
        }
        try hostA.approve(token: token, endUserID: "user-1")
        #expect(hostAItems.beforeWriting == nil, "host A did not write")
        #expect(try hostB.loadSession(authEnvironmentID: "env-1") == .absent)
    }

    @Test("of two hosts removing one item, exactly one removes it")
    func exactRemoval() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let first = try openVaultStore(prefix: prefix), second = try openVaultStore(prefix: prefix)
        try first.replace(everything, with: item(["k": "1"], secret: "shared"))
        let seenByFirst = try #require(try first.found(everything).first)
        let seenBySecond = try #require(try second.found(everything).first)
        #expect(try first.remove(seenByFirst, while: { $0.secret == Secret("shared") }) == true)
        #expect(try second.remove(seenBySecond, while: { $0.secret == Secret("shared") }) == false)
        // The path is used again when the item is stored again.
        try second.replace(everything, with: item(["k": "1"], secret: "again"))
        #expect(try first.search(everything).map(\.secret.text) == ["again"])
    }

    @Test("concurrent removals by many hosts count one removal in all")
    func concurrentRemovals() throws {
        let prefix = OpenBaoServer.freshPrefix()
        try openVaultStore(prefix: prefix).replace(everything, with: item(["k": "1"], secret: "shared"))
        let stores = try (0..<6).map { _ in try openVaultStore(prefix: prefix) }
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: stores.count)
        defer { counts.deallocate() }
        nonisolated(unsafe) let shared = counts
        nonisolated(unsafe) let handles = stores
        DispatchQueue.concurrentPerform(iterations: handles.count) { index in
            shared[index] = (try? handles[index].delete(everything) { $0.secret == Secret("shared") }) ?? -100
        }
        #expect(counts.reduce(0, +) == 1)
    }

    @Test("a store's times are the server's: created stays, modified moves, newest first")
    func times() throws {
        let store = try openVaultStore(prefix: OpenBaoServer.freshPrefix())
        try store.replace(everything, with: item(["k": "1"], secret: "a"))
        let first = try #require(try store.search(everything).first)
        try store.replace(everything, with: item(["k": "1"], secret: "b"))
        let second = try #require(try store.search(everything).first)
        let now = Int64(Date().timeIntervalSince1970)
        #expect(abs((first.created ?? 0) - now) < 300)
        #expect(second.created == first.created)
        #expect(second.sequence > first.sequence)
    }

    @Test("RFC 3339 times read as Unix seconds and nanoseconds")
    func rfc3339() {
        #expect(VaultTime.parse("1970-01-01T00:00:00Z")! == (0, 0))
        #expect(VaultTime.parse("2024-02-29T12:00:00.5Z")! == (1_709_208_000, 1_709_208_000_500_000_000))
        #expect(VaultTime.parse("2026-12-01T15:18:10.590010154Z")!.nanoseconds % 1_000_000_000 == 590_010_154)
        #expect(VaultTime.parse("2024-02-29T13:00:00+01:00")!.seconds == 1_709_208_000)
        #expect(VaultTime.parse("not a time") == nil)
    }
}

/// A Vault store under `prefix` that logs in with an AppRole.
private func openAppRoleStore(prefix: String, roleID: String, secretIDFile: String) -> VaultItemStore {
    let options = VaultOptions(
        address: (try? OpenBaoServer.address) ?? "", pathPrefix: prefix,
        token: .appRole(roleID: roleID, secretIDFile: secretIDFile, mount: VaultOptions.defaultAppRoleMount),
        http: HTTPTransportOptions(caBundlePath: try? OpenBaoServer.caFile))
    return VaultItemStore(
        options: options, transport: CurlTransport(options: options.http), environment: { _ in nil },
        monotonicNow: { MonotonicClock.nanoseconds() / 1_000_000_000 })
}

@Suite("the Vault store's AppRole login")
struct VaultStoreAppRoleTests {
    @Test("a host logs in with its role ID and secret ID file, and works under the role's policy")
    func logsIn() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let role = try OpenBaoServer.appRole(
            policy: OpenBaoServer.readWritePolicy(prefix: prefix), directory: directory)
        let store = openAppRoleStore(prefix: prefix, roleID: role.roleID, secretIDFile: role.secretIDFile)
        try store.replace(everything, with: item(["k": "1"], secret: "by-approle"))
        #expect(try openVaultStore(prefix: prefix).search(everything).map(\.secret.text) == ["by-approle"])
    }

    @Test("a token past half its lease is renewed, not replaced by a new login")
    func renewsNearExpiry() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // The secret ID serves one login, and the token lives 6 seconds unless renewed: after 10
        // seconds only renewals can have kept the store working.
        let role = try OpenBaoServer.appRole(
            policy: OpenBaoServer.readWritePolicy(prefix: prefix), directory: directory, tokenTTL: "6s",
            secretIDUses: 1)
        let store = openAppRoleStore(prefix: prefix, roleID: role.roleID, secretIDFile: role.secretIDFile)
        try store.replace(everything, with: item(["k": "1"], secret: "v0"))
        for round in 1...3 {
            sleep(4)
            try store.replace(everything, with: item(["k": "1"], secret: "v\(round)"))
        }
        #expect(try store.search(everything).map(\.secret.text) == ["v3"])
    }
}

@Suite("the Vault store's errors")
struct VaultStoreErrorTests {
    @Test("a token whose policy only reads can search, and a write names the path it was refused")
    func readOnlyPolicy() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try openVaultStore(prefix: prefix).replace(everything, with: item(["k": "1"], secret: "kept"))
        let reader = try openVaultStore(
            prefix: prefix,
            tokenFile: try OpenBaoServer.tokenFile(
                policy: OpenBaoServer.readOnlyPolicy(prefix: prefix), directory: directory))
        #expect(try reader.search(everything).map(\.secret.text) == ["kept"])
        #expect {
            try reader.replace(everything, with: item(["k": "2"], secret: "refused"))
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.message.hasPrefix("permission denied by policy for secret/")
                && error.message.contains(prefix) && !error.message.contains("refused")
        }
    }

    @Test("a revoked token is an error that says so, with a hint")
    func revokedToken() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokenFile = try OpenBaoServer.tokenFile(
            policy: OpenBaoServer.readWritePolicy(prefix: prefix), directory: directory)
        let store = try openVaultStore(prefix: prefix, tokenFile: tokenFile)
        try store.replace(everything, with: item(["k": "1"], secret: "x"))
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8)
        try OpenBaoServer.revoke(tokenFile: tokenFile)
        #expect {
            _ = try openVaultStore(prefix: prefix, tokenFile: tokenFile).search(everything)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.message.contains("expired, revoked or unknown") && error.hint != nil
                && !error.message.contains(token.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    @Test("a token file rewritten by an agent is read again")
    func tokenFileRewritten() throws {
        let prefix = OpenBaoServer.freshPrefix()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let policy = OpenBaoServer.readWritePolicy(prefix: prefix)
        let sink = directory.appendingPathComponent("sink").path
        let first = try OpenBaoServer.tokenFile(policy: policy, directory: directory)
        try FileManager.default.copyItem(atPath: first, toPath: sink)
        let store = try openVaultStore(prefix: prefix, tokenFile: sink)
        try store.replace(everything, with: item(["k": "1"], secret: "one"))
        try OpenBaoServer.revoke(tokenFile: first)
        #expect(throws: StoreError.self) { try store.search(everything) }
        // The agent writes a new token beside the sink and renames it over it.
        let second = try OpenBaoServer.tokenFile(policy: policy, directory: directory)
        #expect(rename(second, sink) == 0)
        #expect(try store.search(everything).map(\.secret.text) == ["one"])
    }

    @Test("an address nothing listens on is unavailable, and says where")
    func unreachable() throws {
        let options = VaultOptions(
            address: "https://127.0.0.1:9", token: .environment("VAULT_TOKEN"),
            http: HTTPTransportOptions(connectTimeoutMilliseconds: 2000))
        let store = VaultItemStore(
            options: options, transport: CurlTransport(options: options.http), environment: { _ in "t" },
            monotonicNow: { 0 })
        #expect {
            _ = try store.search(everything)
        } throws: { error in
            (error as? StoreError)?.kind == .unavailable
                && (error as? StoreError)?.message.contains("127.0.0.1") == true
        }
    }

    @Test("a server whose certificate the CA file does not vouch for is refused")
    func untrustedCertificate() throws {
        let options = VaultOptions(address: try OpenBaoServer.address, token: .file(try OpenBaoServer.rootTokenFile))
        let store = VaultItemStore(
            options: options, transport: CurlTransport(options: options.http), environment: { _ in nil },
            monotonicNow: { 0 })
        #expect {
            _ = try store.search(everything)
        } throws: { error in
            (error as? StoreError)?.kind == .unavailable
                && (error as? StoreError)?.hint?.contains("VAULT_CACERT") == true
        }
    }
}

/// A host's Vault store that lets another host act once, between this host's check of what is
/// stored and its write: the interleaving of a race, made deterministic.
private final class Interleaving: ForwardingItemStore {
    var beforeWriting: (() -> Void)?

    override func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        try inner.replace(
            filters,
            ifNewest: { newest in
                let accepted = condition(newest)
                if let act = beforeWriting {
                    beforeWriting = nil
                    act()
                }
                return accepted
            }, where: isPrevious, with: item)
    }
}

/// The transport of a host on a standby node that cannot forward: the first request for a KV path
/// is answered 307 to `location`'s origin, as such a standby answers; every request the real
/// transport sends is recorded (its origin, and whether it carried the token).
final class RedirectingStandby: HTTPTransport, @unchecked Sendable {
    let inner: CurlTransport
    let location: String
    let sent = Locked<[(origin: String, carriedToken: Bool)]>([])
    let redirected = Locked(false)

    init(_ inner: CurlTransport, redirectingTo location: String) {
        self.inner = inner
        self.location = location
    }

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let path = request.url.firstRange(of: "/v1/").map { String(request.url[$0.lowerBound...]) } ?? ""
        if path.hasPrefix("/v1/secret/"), !redirected.value {
            redirected.update { $0 = true }
            return HTTPResponse(
                status: 307, headers: [HTTPHeader("Location", location + path)], effectiveURL: request.url)
        }
        let origin = VaultClient.origin(of: request.url) ?? ""
        sent.update { $0.append((origin, request.authorization != nil)) }
        return try inner.send(request)
    }
}

@Suite("the Vault store on a Raft cluster's standby")
struct VaultStandbyTests {
    func store(_ cluster: OpenBaoCluster, node: Int, redirectingTo location: String) throws
        -> (VaultItemStore, RedirectingStandby)
    {
        let options = VaultOptions(
            address: cluster.addresses[node], pathPrefix: "portal-token/redirect-\(UInt32.random(in: 0...UInt32.max))",
            token: .file(cluster.tokenFile),
            http: HTTPTransportOptions(caBundlePath: cluster.caFile))
        var http = options.http
        http.trustsCABundleOnly = true
        let transport = RedirectingStandby(CurlTransport(options: http), redirectingTo: location)
        let store = VaultItemStore(
            options: options, transport: transport, environment: { _ in nil }, monotonicNow: { 0 })
        return (store, transport)
    }

    @Test("a standby's redirect is followed to the leader the cluster names, with the token, and nowhere else")
    func redirects() throws {
        try OpenBaoCluster.exclusively {
            let cluster = try OpenBaoCluster()
            let leader = try #require(try cluster.leader())
            let standby = try #require(cluster.liveNodes.first { $0 != leader })
            let leaderOrigin = cluster.addresses[leader]

            // To the leader the cluster names: followed, token and all; the item is written there.
            let (followed, toLeader) = try store(cluster, node: standby, redirectingTo: leaderOrigin)
            try followed.replace(everything, with: item(["name": "redirected"], secret: "s3cret"))
            #expect(toLeader.sent.value.contains { $0.origin == leaderOrigin && $0.carriedToken })
            #expect(try followed.search(everything).map(\.secret.text) == ["s3cret"])

            // To any other origin, or down to http: refused, and nothing is sent there.
            for elsewhere in [
                leaderOrigin.replacingOccurrences(of: "127.0.0.1", with: "127.0.0.2"),
                leaderOrigin.replacingOccurrences(of: "https://", with: "http://"),
            ] {
                let (refused, transport) = try store(cluster, node: standby, redirectingTo: elsewhere)
                #expect {
                    _ = try refused.search(everything)
                } throws: { error in
                    (error as? StoreError)?.message.contains("does not name as its leader") == true
                }
                #expect(!transport.sent.value.contains { $0.origin == elsewhere }, "\(transport.sent.value)")
            }
        }
    }
}
