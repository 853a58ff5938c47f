import PortalTokenCore

/// `logout`: the account's session, its two-factor step and its remembered entry removed.
package enum Logout {
    /// The environment signed out of, and whether a session was stored.
    package static func run(_ context: Context) throws -> (authEnvironmentID: String, removed: Bool) {
        let account = try context.accountChoice()
        let environmentID = account.authEnvironmentID
        let sessions = try context.sessionService()
        let steps = try context.twoFactorSteps()
        // Under the sign-in lock: a sign-in finishing right now is removed after its write, not before.
        // The end user signed out: the one named, else the one whose session is served.
        var endUser = account.endUserID
        let removed = try context.signInLock().withLock {
            if endUser == nil { endUser = try sessions.restore()?.endUserID }
            let removed = try sessions.remove()
            try SignInService.forget(
                authEnvironmentID: environmentID, steps: steps, memory: context.services.secretCache())
            return removed
        }
        context.forgetAccount(environmentID, endUserID: endUser)
        if !removed { context.audit?.outcome = .notFound }
        return (environmentID, removed)
    }
}
