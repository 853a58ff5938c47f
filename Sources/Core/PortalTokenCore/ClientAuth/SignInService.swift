/// Why a sign-in step did not end in a session, beyond what Portal or the store said.
public enum SignInError: Error, Sendable, Equatable {
    /// `redirect` was given a URL that is not a sign-in redirect for this configuration (exit 7).
    /// The reason names which check failed, never any of the URL.
    case notARedirect(RedirectURL.NotOursReason)
    /// Portal accepted the grant (or the two-factor code) but the store refused the result
    /// (exit 4). `kept` says whether the result waits in memory, so that delivering the same
    /// redirect again (or running `verify-totp` again) finishes the write without asking Portal.
    case notStored(StoreError, endUserID: String, stage: Stage, kept: Bool)
    /// `verify-totp` found no two-factor step waiting for this environment (exit 1).
    case noPendingStep(authEnvironmentID: String)
    /// The waiting two-factor step passed its 10 minutes and was removed (exit 6).
    case stepExpired(endUserID: String)

    public enum Stage: Sendable, Equatable {
        /// The grant exchange answered with a session.
        case session
        /// The grant exchange answered with a two-factor step.
        case twoFactorStep
        /// The two-factor code was accepted.
        case twoFactorCode
    }

    public var message: String {
        switch self {
        case .notARedirect(let reason):
            return "the URL is not a sign-in redirect for this configuration (\(reason.rawValue))"
        case .notStored(let error, let endUserID, let stage, _):
            switch stage {
            case .session, .twoFactorCode:
                return "Portal signed in \(endUserID), but the session could not be stored: \(error.message)"
            case .twoFactorStep:
                return "the two-factor step for \(endUserID) could not be stored: \(error.message)"
            }
        case .noPendingStep(let environment):
            return "no two-factor step is waiting for environment '\(environment)'"
        case .stepExpired(let endUserID):
            return "the two-factor step for \(endUserID) expired"
        }
    }

    public var hint: String? {
        switch self {
        case .notARedirect:
            return
                """
                give the whole URL the browser was sent to: the configured redirect URL with token= and \
                authMethod=EMAIL_MAGIC_LINK or login_type=GOOGLE|APPLE
                """
        case .notStored(let error, _, let stage, let kept):
            let fix = error.hint.map { "\($0); then " } ?? "fix the store; then "
            guard kept else { return fix + "sign in again with 'portal-token login'" }
            switch stage {
            case .session, .twoFactorStep:
                return fix
                    + """
                    open the same sign-in link again (or give it to 'portal-token redirect') within 15 minutes: it \
                    finishes without a second sign-in
                    """
            case .twoFactorCode:
                return fix + "run 'portal-token verify-totp' again within 15 minutes: it finishes without a new code"
            }
        case .noPendingStep:
            return "sign in with 'portal-token login'"
        case .stepExpired:
            return "a two-factor step lasts 10 minutes; sign in again with 'portal-token login'"
        }
    }
}

/// What delivering a redirect led to.
public enum RedirectOutcome: Sendable, CustomStringConvertible {
    /// The session is stored. `replayed`: the grant had been exchanged already (by this or
    /// another process) and no request was sent.
    case signedIn(PortalSession, replayed: Bool)
    /// A two-factor code is needed. `enrollment` is the `totpLink` of a first enrollment (shown
    /// once, never stored). `notKept` is the store's refusal when the step could not be kept for
    /// `verify-totp` (the step then waits in memory for a redelivery).
    case twoFactorRequired(PendingTwoFactor, enrollment: Secret?, notKept: SignInError?, replayed: Bool)

    public var description: String {
        switch self {
        case .signedIn(let session, let replayed): return "signedIn(\(session.endUserID), replayed: \(replayed))"
        case .twoFactorRequired(let step, let enrollment, _, let replayed):
            return
                """
                twoFactorRequired(\(step.endUserID), enrollment: \(enrollment == nil ? "nil" : "<redacted>"), \
                replayed: \(replayed))
                """
        }
    }
}

/// Completing a Portal sign-in (docs/portal-api.md, "Redirect URLs", "A redirect delivered twice"; docs/signing-in.md)
/// for one auth environment: the redirect and its single-use grant, the two-factor step, and persist-before-return.
///
/// Every grant exchange and code check runs under a cross-process sign-in lock, from the replay
/// check through the request to the write, so that the same redirect delivered twice at once is
/// exchanged once. What is remembered of a grant is its digest (`GrantDigest`), in the session
/// record it produced or in the pending two-factor step: while either is stored, the same
/// redirect resolves to it with no request. After a sign-out both are gone, and a replayed grant
/// reaches Portal, which refuses a spent grant.
public final class SignInService {
    /// How long a result that could not be written waits in memory: a grant's lifetime.
    public static let keptResultLifetimeSeconds = 15 * 60

    public let configuration: ClientAuthConfiguration
    public let client: ClientAuthClient
    private let sessions: Sessions
    private let steps: TwoFactorStepItems
    private let sessionLock: any SessionLock
    private let signInLock: any SessionLock
    /// Where a result that could not be written waits (docs/portal-api.md, "A redirect delivered twice", "pending
    /// persist"): the kernel keyring in production, named by digests only, expiring on its own.
    private let memory: any SecretCache
    private let now: () -> Int64
    private let trace: (String) -> Void

    public init(
        configuration: ClientAuthConfiguration, client: ClientAuthClient, sessions: Sessions,
        steps: TwoFactorStepItems, sessionLock: any SessionLock, signInLock: any SessionLock,
        memory: any SecretCache, now: @escaping () -> Int64, trace: @escaping (String) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.client = client
        self.sessions = sessions
        self.steps = steps
        self.sessionLock = sessionLock
        self.signInLock = signInLock
        self.memory = memory
        self.now = now
        self.trace = trace
    }

    public var authEnvironmentID: String { configuration.authEnvironmentID }

    /// The prefix of every memory entry of an environment, for sign-out.
    public static func memoryPrefix(authEnvironmentID: String) -> String {
        "portal-token:sign-in:\(GrantDigest.environmentTag(authEnvironmentID)):"
    }

    private func exchangeMemoryName(_ grantDigest: String) -> String {
        Self.memoryPrefix(authEnvironmentID: authEnvironmentID) + "grant:" + grantDigest
    }

    private func codeMemoryName(_ step: PendingTwoFactor) -> String {
        Self.memoryPrefix(authEnvironmentID: authEnvironmentID) + "two-factor:"
            + GrantDigest.of(step.userJWT, authEnvironmentID: authEnvironmentID)
    }

    /// Reads the stored session once, so that a store that cannot be read (a locked keyring, a
    /// missing passphrase) is reported before an email is sent or a grant exists.
    public func checkStore() throws {
        _ = try sessions.loadSession(authEnvironmentID: authEnvironmentID)
    }

    // MARK: Redirects

    /// Completes a sign-in from the URL a redirect delivered (docs/portal-api.md, "Redirect URLs", in its
    /// order), and persists the session before returning it.
    public func completeRedirect(_ url: Secret) throws -> RedirectOutcome {
        try complete(try accept(url))
    }

    /// A redirect URL that passed the checks: its grant, not yet exchanged.
    public struct AcceptedRedirect: Sendable {
        let grant: Secret
        let endpoint: GrantEndpoint
    }

    /// The checks of a redirect URL (docs/portal-api.md, "Redirect URLs"), which send nothing:
    /// what they refuse is thrown (not ours, or an `error` parameter); what they accept is the
    /// grant `complete` exchanges. The desktop handler answers its launcher in between
    /// (docs/signing-in.md, "Completing it: a custom scheme and the desktop handler").
    public func accept(_ url: Secret) throws -> AcceptedRedirect {
        let redirectURL = try configuration.requireRedirectURL()
        switch RedirectURL.evaluate(url.text, configured: redirectURL) {
        case .notOurs(let reason):
            trace("redirect: not ours: \(reason.rawValue)")
            throw SignInError.notARedirect(reason)
        case .authenticationFailed(let message):
            trace("redirect: carries an error parameter; nothing sent")
            throw ClientAuthError.authenticationFailed(message)
        case .exchange(let grant, let endpoint):
            return AcceptedRedirect(grant: grant, endpoint: endpoint)
        }
    }

    /// Exchanges an accepted redirect's grant, once across processes, and persists the session
    /// before returning it.
    public func complete(_ accepted: AcceptedRedirect) throws -> RedirectOutcome {
        let digest = GrantDigest.of(accepted.grant, authEnvironmentID: authEnvironmentID)
        return try signInLock.withLock { try exchangeOnce(accepted.grant, at: accepted.endpoint, digest: digest) }
    }

    private func exchangeOnce(_ grant: Secret, at endpoint: GrantEndpoint, digest: String) throws -> RedirectOutcome {
        let time = now()
        // The grant was exchanged before: by another process, or by an earlier delivery.
        if case .present(let session) = try sessions.loadSession(authEnvironmentID: authEnvironmentID),
            session.grantDigest == digest, session.decision(at: time) != .expired
        {
            trace("redirect: this grant was exchanged for the stored session of \(session.endUserID); no request")
            return .signedIn(session, replayed: true)
        }
        if let step = try steps.loadStep(authEnvironmentID: authEnvironmentID), step.grantDigest == digest,
            !step.isExpired(at: time)
        {
            trace("redirect: this grant was exchanged for the waiting two-factor step of \(step.endUserID); no request")
            return .twoFactorRequired(step, enrollment: nil, notKept: nil, replayed: true)
        }
        let memoryName = exchangeMemoryName(digest)
        if let kept = memory.read(memoryName) {
            if let session = PortalSession.decode(payload: kept, authEnvironmentID: authEnvironmentID) {
                trace("redirect: finishing the write of a session Portal gave for this grant earlier; no request")
                try persist(session, memoryName: memoryName, stage: .session)
                return .signedIn(session, replayed: true)
            }
            if let step = PendingTwoFactor.decode(payload: kept, authEnvironmentID: authEnvironmentID) {
                trace(
                    "redirect: finishing the write of a two-factor step Portal gave for this grant earlier; no request")
                let notKept = keep(step, memoryName: memoryName)
                if let notKept { throw notKept }
                return .twoFactorRequired(step, enrollment: nil, notKept: nil, replayed: true)
            }
            memory.drop(memoryName)
        }
        trace("redirect: exchanging the grant at \(endpoint.endpoint.path)")
        switch try client.exchange(grant: grant, at: endpoint) {
        case .authenticated(let authenticated):
            let session = PortalSession(
                token: authenticated.token, endUserID: authenticated.endUserID,
                authEnvironmentID: authEnvironmentID, issuedAt: time, lastActivityAt: time,
                grantDigest: digest)
            try persist(session, memoryName: memoryName, stage: .session)
            return .signedIn(session, replayed: false)
        case .totpRequired(let step):
            // The end user comes from the userJwt, read before any further request (docs/portal-api.md, "The two-factor
            // token").
            let endUserID = try UserJWT.endUserID(in: step.userJWT)
            let pending = PendingTwoFactor(
                userJWT: step.userJWT, endUserID: endUserID, authEnvironmentID: authEnvironmentID,
                expiresAt: time + PendingTwoFactor.lifetime, grantDigest: digest)
            trace("redirect: Portal asks for a two-factor code for \(endUserID)")
            return .twoFactorRequired(
                pending, enrollment: step.totpLink, notKept: keep(pending, memoryName: memoryName),
                replayed: false)
        }
    }

    /// Keeps a result that could not be written; true when it can be read back (a kernel
    /// without keyrings keeps nothing, and the caller must not promise a redelivery).
    private func remember(_ payload: Secret, as name: String) -> Bool {
        memory.store(payload, as: name, forSeconds: Self.keptResultLifetimeSeconds)
        return memory.read(name) != nil
    }

    /// Stores the step for `verify-totp`; on failure it waits in memory for a redelivery, and
    /// the refusal is returned for the caller to report or pass over.
    private func keep(_ step: PendingTwoFactor, memoryName: String) -> SignInError? {
        do {
            try steps.saveStep(step)
            memory.drop(memoryName)
            return nil
        } catch {
            let kept = remember(step.payload, as: memoryName)
            return .notStored(error, endUserID: step.endUserID, stage: .twoFactorStep, kept: kept)
        }
    }

    /// Writes the session under the session lock before anyone is told of it (docs/portal-api.md, "A redirect delivered
    /// twice"). On a failure the session waits in memory under `memoryName` and `notStored` is thrown.
    private func persist(_ session: PortalSession, memoryName: String, stage: SignInError.Stage) throws {
        do {
            try sessionLock.withLock { try sessions.saveSession(session) }
        } catch let error as StoreError {
            let kept = remember(session.payload, as: memoryName)
            trace("storage: the session could not be written; \(kept ? "kept in memory for a redelivery" : "not kept")")
            throw SignInError.notStored(error, endUserID: session.endUserID, stage: stage, kept: kept)
        }
        memory.drop(memoryName)
        // The session supersedes any step still waiting; a failure here leaves a step that
        // expires on its own.
        _ = try? steps.deleteStep(authEnvironmentID: authEnvironmentID)
        trace("storage: the session of \(session.endUserID) is stored")
    }

    // MARK: Two-factor

    /// The step waiting for a code. An expired step is removed and reported, unless Portal
    /// already accepted its code and only the write is left to finish.
    public func pendingStep() throws -> PendingTwoFactor {
        guard let step = try steps.loadStep(authEnvironmentID: authEnvironmentID) else {
            throw SignInError.noPendingStep(authEnvironmentID: authEnvironmentID)
        }
        if step.isExpired(at: now()), memory.read(codeMemoryName(step)) == nil {
            _ = try? steps.deleteStep(authEnvironmentID: authEnvironmentID)
            throw SignInError.stepExpired(endUserID: step.endUserID)
        }
        return step
    }

    /// Finishes the write of a session whose code Portal accepted earlier but which could not be
    /// stored; nil when there is none (then a code is needed).
    public func finishAcceptedCode(for step: PendingTwoFactor) throws -> PortalSession? {
        try signInLock.withLock { try finishKept(step) }
    }

    private func finishKept(_ step: PendingTwoFactor) throws -> PortalSession? {
        let memoryName = codeMemoryName(step)
        guard let kept = memory.read(memoryName) else { return nil }
        guard let session = PortalSession.decode(payload: kept, authEnvironmentID: authEnvironmentID) else {
            memory.drop(memoryName)
            return nil
        }
        trace("two-factor: finishing the write of the session Portal gave for an accepted code; no request")
        try persist(session, memoryName: memoryName, stage: .twoFactorCode)
        return session
    }

    /// Sends the code (six digits, checked first) with the step's `userJwt`, and stores the
    /// session before returning it. A code Portal refuses (`ClientAuthError.isRejectedCode`)
    /// leaves the step usable for another try.
    public func verify(code: String, for step: PendingTwoFactor) throws -> PortalSession {
        try signInLock.withLock {
            if let session = try finishKept(step) { return session }
            trace("two-factor: sending the code for \(step.endUserID)")
            let authenticated = try client.verifyTOTP(code: code, userJWT: step.userJWT)
            let time = now()
            let session = PortalSession(
                token: authenticated.token, endUserID: step.endUserID,
                authEnvironmentID: authEnvironmentID, issuedAt: time, lastActivityAt: time,
                grantDigest: step.grantDigest)
            try persist(session, memoryName: codeMemoryName(step), stage: .twoFactorCode)
            return session
        }
    }

    // MARK: Sign-out

    /// Forgets everything a sign-in left behind besides the session: the waiting step and the
    /// results kept in memory. With the session gone too, a replayed grant reaches Portal.
    public static func forget(authEnvironmentID: String, steps: TwoFactorStepItems, memory: any SecretCache) throws {
        memory.dropAll(withPrefix: memoryPrefix(authEnvironmentID: authEnvironmentID))
        try steps.deleteStep(authEnvironmentID: authEnvironmentID)
    }
}
