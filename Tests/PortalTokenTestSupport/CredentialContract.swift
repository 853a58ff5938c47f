import PortalTokenCore

/// One check of the git credential contract: what the credential codec must do over every item
/// store, whatever keeps the bytes. Each check works under its own host, so checks can share a
/// real keyring.
public struct CredentialContractCheck: Sendable, CustomStringConvertible {
    public let description: String
    let body: @Sendable (CredentialItems, String) throws -> Void

    /// Runs the check over `items`, under a host no other check uses.
    public func run(on items: any ItemStore) throws {
        try body(CredentialItems(items), "contract-\(UInt32.random(in: 0...UInt32.max)).example")
    }
}

public struct ContractFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

private func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ContractFailure(message()) }
}

private func credential(
    _ host: String, user: String = "user", password: String = "pass",
    protocolName: String = "https", port: Int? = nil, path: String? = nil,
    expiresAt: Int64? = nil, refreshToken: String? = nil
) -> Credential {
    Credential(
        protocolName: protocolName, host: CredentialHost(server: host, port: port), path: path,
        username: user, password: Secret(password), passwordExpiresAt: expiresAt,
        oauthRefreshToken: refreshToken.map(Secret.init))
}

private func query(
    _ host: String, user: String? = nil, protocolName: String? = "https", port: Int? = nil,
    path: String? = nil, password: String? = nil
) -> CredentialQuery {
    CredentialQuery(
        protocolName: protocolName, host: CredentialHost(server: host, port: port), path: path,
        username: user, password: password.map(Secret.init))
}

private func passwords(_ credentials: [Credential]) -> [String] { credentials.map(\.password.text) }

public enum CredentialContract {
    public static let checks: [CredentialContractCheck] = [
        .init(description: "a stored credential is found with all its attributes") { store, host in
            try store.store(credential(host, expiresAt: 4_102_444_800, refreshToken: "refresh-1"))
            let found = try store.lookup(query(host))
            try expect(found.count == 1, "expected one credential, found \(found.count)")
            try expect(
                found[0] == credential(host, expiresAt: 4_102_444_800, refreshToken: "refresh-1"),
                "the stored credential did not read back unchanged")
        },
        .init(description: "nothing is found for a host never stored") { store, host in
            try expect(try store.lookup(query(host)).isEmpty, "found a credential for an unused host")
        },
        .init(description: "store replaces the credential of the same protocol, host, path and username") {
            store, host in
            try store.store(credential(host, password: "old", expiresAt: 4_102_444_800, refreshToken: "r"))
            try store.store(credential(host, password: "new"))
            let found = try store.lookup(query(host))
            try expect(passwords(found) == ["new"], "expected only the new password, found \(found.count) entries")
            try expect(
                found[0].passwordExpiresAt == nil && found[0].oauthRefreshToken == nil,
                "the replaced credential kept the old expiry or refresh token")
        },
        .init(description: "protocol, port and path each separate credentials") { store, host in
            try store.store(credential(host, password: "https"))
            try store.store(credential(host, password: "http", protocolName: "http"))
            try store.store(credential(host, password: "port", port: 8443))
            try store.store(credential(host, password: "path", path: "repo.git"))
            try expect(
                passwords(try store.lookup(query(host, protocolName: "http"))) == ["http"], "protocol did not separate")
            try expect(passwords(try store.lookup(query(host, port: 8443))) == ["port"], "port did not separate")
            try expect(passwords(try store.lookup(query(host, port: 8444))).isEmpty, "another port matched")
            try expect(passwords(try store.lookup(query(host, path: "repo.git"))) == ["path"], "path did not separate")
            try expect(passwords(try store.lookup(query(host, path: "other.git"))).isEmpty, "another path matched")
            // Without a path in the query (git without credential.useHttpPath) any path matches,
            // but a port always has to: example.com and example.com:8443 are different hosts.
            try expect(
                Set(passwords(try store.lookup(query(host)))) == ["https", "path"],
                "a port-less https query should find the port-less credentials only")
        },
        .init(description: "several users on one host are kept apart") { store, host in
            try store.store(credential(host, user: "alice", password: "a"))
            try store.store(credential(host, user: "bob", password: "b"))
            try expect(passwords(try store.lookup(query(host, user: "alice"))) == ["a"], "alice's password")
            try expect(passwords(try store.lookup(query(host, user: "bob"))) == ["b"], "bob's password")
            try expect(passwords(try store.lookup(query(host, user: "carol"))).isEmpty, "an unknown user matched")
        },
        .init(description: "lookup lists the most recently stored match first") { store, host in
            try store.store(credential(host, user: "first", password: "1"))
            try store.store(credential(host, user: "second", password: "2"))
            try expect(passwords(try store.lookup(query(host))) == ["2", "1"], "second should come first")
            try store.store(credential(host, user: "first", password: "1b"))
            try expect(
                passwords(try store.lookup(query(host))) == ["1b", "2"], "the re-stored first should come first")
        },
        .init(description: "erase removes every match and nothing else") { store, host in
            try store.store(credential(host, user: "alice"))
            try store.store(credential(host, user: "bob"))
            try store.store(credential(host, user: "alice", protocolName: "http"))
            let removed = try store.erase(query(host))
            try expect(removed == 2, "expected 2 removed, got \(removed)")
            try expect(try store.lookup(query(host)).isEmpty, "an https credential survived")
            try expect(
                try store.lookup(query(host, protocolName: "http")).count == 1, "the http credential was removed")
        },
        .init(description: "erase of one user keeps the other") { store, host in
            try store.store(credential(host, user: "alice", password: "a"))
            try store.store(credential(host, user: "bob", password: "b"))
            try store.erase(query(host, user: "alice"))
            try expect(passwords(try store.lookup(query(host))) == ["b"], "bob's credential should remain alone")
        },
        .init(description: "erase with a password removes only entries holding it") { store, host in
            try store.store(credential(host, user: "alice", password: "current"))
            try store.store(credential(host, user: "bob", password: "stale"))
            try expect(try store.erase(query(host, password: "other")) == 0, "a different password erased something")
            try expect(try store.erase(query(host, password: "stale")) == 1, "the matching password was not erased")
            try expect(passwords(try store.lookup(query(host))) == ["current"], "the wrong entry was erased")
        },
        .init(description: "an empty username and password round-trip") { store, host in
            try store.store(credential(host, user: "", password: ""))
            let found = try store.lookup(query(host))
            try expect(
                found.count == 1 && found[0].username == "" && found[0].password.isEmpty,
                "the empty credential did not read back")
        },
        .init(description: "long and non-ASCII values round-trip byte for byte") { store, host in
            let long = String(repeating: "pässwörd-ü", count: 7000)
            try store.store(
                credential(host, user: "名前", password: long, refreshToken: String(repeating: "r", count: 70000)))
            let found = try store.lookup(query(host, user: "名前"))
            try expect(found.count == 1 && found[0].password.text == long, "the long password changed")
            try expect(found[0].oauthRefreshToken?.byteCount == 70000, "the long refresh token changed")
        },
        // git 2.46+: authtype/credential pairs, with a password or alone (bearer-only).
        .init(description: "an authtype/credential pair round-trips, with a password or alone") { store, host in
            try store.store(bearer(host, user: "with-password", password: "pw", token: "t1"))
            try store.store(bearer(host, user: "", token: "t2"))
            let found = try store.lookup(query(host))
            try expect(found.count == 2, "expected two credentials, found \(found.count)")
            try expect(
                found.contains(bearer(host, user: "with-password", password: "pw", token: "t1")),
                "the credential with a password and a pair did not read back unchanged")
            try expect(
                found.contains(bearer(host, user: "", token: "t2")),
                "the bearer-only credential did not read back unchanged")
        },
        .init(description: "a bearer-only credential is found only by queries that include it") { store, host in
            try store.store(bearer(host, user: "", token: "t"))
            try store.store(credential(host, user: "u", password: "pw"))
            var plain = query(host)
            plain.includesBearerOnly = false
            try expect(
                passwords(try store.lookup(plain)) == ["pw"], "a query without bearer-only credentials found one")
            try expect(try store.lookup(query(host)).count == 2, "a query including bearer-only credentials missed one")
        },
        .init(description: "a bearer-only and a password credential of the same slot replace each other") {
            store, host in
            try store.store(credential(host, user: "u", password: "pw"))
            try store.store(bearer(host, user: "u", token: "t"))
            var found = try store.lookup(query(host))
            try expect(
                found.count == 1 && found[0].isBearerOnly, "the bearer-only credential did not replace the password")
            try store.store(credential(host, user: "u", password: "pw2"))
            found = try store.lookup(query(host))
            try expect(
                passwords(found) == ["pw2"] && found[0].credential == nil,
                "the password did not replace the bearer-only credential")
        },
        .init(description: "erase with a credential removes only entries holding it, bearer-only ones included") {
            store, host in
            try store.store(bearer(host, user: "", token: "current"))
            try store.store(bearer(host, user: "other", password: "pw", token: "stale"))
            var pattern = query(host)
            pattern.credential = Secret("unknown")
            try expect(try store.erase(pattern) == 0, "a different credential erased something")
            pattern.credential = Secret("stale")
            try expect(try store.erase(pattern) == 1, "the credential with a password was not erased")
            pattern.credential = Secret("current")
            try expect(try store.erase(pattern) == 1, "the bearer-only credential was not erased")
            try expect(try store.lookup(query(host)).isEmpty, "a credential survived")
        },
    ]
}

private func bearer(_ host: String, user: String, password: String = "", token: String) -> Credential {
    var result = credential(host, user: user, password: password)
    result.authType = "Bearer"
    result.credential = Secret(token)
    return result
}
