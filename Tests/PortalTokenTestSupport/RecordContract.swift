import PortalTokenCore

/// The contract every store of Portal sessions and two-factor steps keeps, whatever keeps the
/// bytes (memory, the encrypted file, the keyring): one record per auth environment, saved,
/// replaced, loaded and deleted alike. Each check works under environments no other check uses,
/// so checks can share a real keyring.
public struct RecordContractCheck: Sendable, CustomStringConvertible {
    public let description: String
    let body: @Sendable (Sessions, TwoFactorStepItems, () -> String) throws -> Void

    /// Runs the check over `items`; with `cache`, the sessions go through a session cache that
    /// keeps copies for 15 minutes.
    public func run(on items: any ItemStore, cache: (any SecretCache)? = nil) throws {
        let sessions = Sessions(
            items,
            cache: cache.map {
                Sessions.Cache(
                    $0, lock: InProcessSessionLock(), store: "contract", timeoutSeconds: 900, now: { 1_700_003_700 })
            })
        try body(sessions, TwoFactorStepItems(items)) { "contract-env-\(UInt32.random(in: 0...UInt32.max))" }
    }
}

private func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ContractFailure(message()) }
}

private func session(
    _ environment: String, user: String = "user-1", token: String = "token-1",
    lastActivityAt: Int64 = 1_700_003_600
) -> PortalSession {
    PortalSession(
        token: Secret(token), endUserID: user, authEnvironmentID: environment,
        issuedAt: 1_700_000_000, lastActivityAt: lastActivityAt)
}

private func step(_ environment: String, user: String = "user-1", jwt: String = "jwt-1") -> PendingTwoFactor {
    PendingTwoFactor(
        userJWT: Secret(jwt), endUserID: user, authEnvironmentID: environment,
        expiresAt: 1_700_000_600, grantDigest: "digest-1")
}

public enum RecordContract {
    public static let checks: [RecordContractCheck] = [
        .init(description: "a saved session loads back unchanged; another environment has none") {
            sessions, _, environment in
            let mine = environment()
            try sessions.saveSession(session(mine))
            defer { _ = try? sessions.deleteSession(authEnvironmentID: mine) }
            try expect(
                try sessions.loadSession(authEnvironmentID: mine) == .present(session(mine)),
                "the session did not read back")
            try expect(
                try sessions.loadSession(authEnvironmentID: environment()) == .absent,
                "another environment had a session")
        },
        .init(description: "saving replaces the environment's session, even for another end user") {
            sessions, _, environment in
            let mine = environment()
            try sessions.saveSession(session(mine, user: "user-1", token: "old"))
            try sessions.saveSession(session(mine, user: "user-2", token: "new", lastActivityAt: 1_700_007_200))
            defer { _ = try? sessions.deleteSession(authEnvironmentID: mine) }
            try expect(
                try sessions.loadSession(authEnvironmentID: mine)
                    == .present(session(mine, user: "user-2", token: "new", lastActivityAt: 1_700_007_200)),
                "the newer session did not replace the older")
        },
        .init(description: "deleting a session removes it, says so once, and leaves other environments") {
            sessions, _, environment in
            let (mine, other) = (environment(), environment())
            try sessions.saveSession(session(mine))
            try sessions.saveSession(session(other, token: "other"))
            defer { _ = try? sessions.deleteSession(authEnvironmentID: other) }
            try expect(try sessions.deleteSession(authEnvironmentID: mine), "the delete said nothing was there")
            try expect(
                try !sessions.deleteSession(authEnvironmentID: mine), "a second delete said it removed something")
            try expect(try sessions.loadSession(authEnvironmentID: mine) == .absent, "the deleted session still loads")
            try expect(
                try sessions.loadSession(authEnvironmentID: other) == .present(session(other, token: "other")),
                "deleting one environment's session touched another's")
        },
        .init(description: "a saved two-factor step loads back, is replaced by the next, and is deleted once") {
            _, steps, environment in
            let mine = environment()
            try expect(try steps.loadStep(authEnvironmentID: mine) == nil, "a step was there before any was saved")
            try steps.saveStep(step(mine, jwt: "old"))
            try steps.saveStep(step(mine, user: "user-2", jwt: "new"))
            try expect(
                try steps.loadStep(authEnvironmentID: mine) == step(mine, user: "user-2", jwt: "new"),
                "the newer step did not replace the older")
            try expect(try steps.deleteStep(authEnvironmentID: mine), "the delete said nothing was there")
            try expect(try !steps.deleteStep(authEnvironmentID: mine), "a second delete said it removed something")
            try expect(try steps.loadStep(authEnvironmentID: mine) == nil, "the deleted step still loads")
        },
        .init(description: "sessions and steps of one environment are kept apart") { sessions, steps, environment in
            let mine = environment()
            try sessions.saveSession(session(mine))
            try steps.saveStep(step(mine))
            try expect(try steps.deleteStep(authEnvironmentID: mine), "the step was not there")
            try expect(
                try sessions.loadSession(authEnvironmentID: mine) == .present(session(mine)),
                "deleting the step touched the session")
            try expect(try sessions.deleteSession(authEnvironmentID: mine), "the session was not there")
        },
    ]
}
