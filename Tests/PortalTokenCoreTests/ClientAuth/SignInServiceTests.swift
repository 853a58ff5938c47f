@testable import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("grant digests")
struct GrantDigestTests {
    @Test(
        "SHA-256 matches the FIPS 180-4 examples",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                """
                abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs\
                mnopqrstnopqrstu
                """,
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
            ),
        ])
    func sha256(input: String, expected: String) {
        #expect(GrantDigest.hex(SHA256Vectors.hash(input)) == expected)
    }

    @Test(
        "HMAC-SHA-256 matches RFC 4231",
        arguments: [
            (
                [UInt8](repeating: 0x0b, count: 20), "Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), "what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131), "Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
        ])
    func hmac(key: [UInt8], message: String, expected: String) {
        #expect(GrantDigest.hex(SHA256Vectors.hmac(Array(message.utf8), key: key)) == expected)
    }

    @Test("a digest is stable, tied to its environment, and shows nothing of the grant")
    func digest() {
        let grant = Secret("grant-1-abcdef")
        let digest = GrantDigest.of(grant, authEnvironmentID: "env-1")
        #expect(digest.count == 64 && digest.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(digest == GrantDigest.of(Secret("grant-1-abcdef"), authEnvironmentID: "env-1"))
        #expect(digest != GrantDigest.of(grant, authEnvironmentID: "env-2"))
        #expect(digest != GrantDigest.of(Secret("grant-1-abcdeF"), authEnvironmentID: "env-1"))
        #expect(!digest.contains("abcdef"))
        #expect(GrantDigest.environmentTag("env-1").count == 16)
        #expect(GrantDigest.environmentTag("env-1") != GrantDigest.environmentTag("env-2"))
    }
}

enum SHA256Vectors {
    static func hash(_ text: String) -> [UInt8] { Sodium.sha256(Array(text.utf8)) }
    static func hmac(_ message: [UInt8], key: [UInt8]) -> [UInt8] { Sodium.hmacSHA256(message, key: key) }
}

@Suite("pending two-factor step")
struct PendingTwoFactorTests {
    @Test("the payload round-trips and never holds a totpLink")
    func roundTrip() throws {
        let step = PendingTwoFactor(
            userJWT: Secret("jwt"), endUserID: "u", authEnvironmentID: "env-1", expiresAt: 1_700_000_600,
            grantDigest: "d")
        #expect(step.payload.text == #"{"endUserId":"u","expiresAt":1700000600,"grantDigest":"d","userJwt":"jwt"}"#)
        #expect(PendingTwoFactor.decode(payload: step.payload, authEnvironmentID: "env-1") == step)
        #expect("\(step)".contains("<redacted>") && !"\(step)".contains("jwt\""))
        #expect(step.isExpired(at: 1_700_000_600) && !step.isExpired(at: 1_700_000_599))
    }

    @Test(
        "records that are not steps read as nil",
        arguments: [
            "", "{", "[]", #"{"userJwt":"j","endUserId":"u"}"#, #"{"userJwt":" ","endUserId":"u","expiresAt":1}"#,
            #"{"userJwt":"j","endUserId":"","expiresAt":1}"#, #"{"userJwt":"j","endUserId":"u","expiresAt":"soon"}"#,
        ])
    func unusable(payload: String) {
        #expect(PendingTwoFactor.decode(payload: Secret(payload), authEnvironmentID: "env-1") == nil)
    }
}

/// A fake Portal for the sign-in service: grants are single-use, codes retryable.
final class ScriptedPortal: Sendable {
    struct State {
        var grants: [String: Bool] = [:]
        var twoFactorGrants: Set<String> = []
        var pendingJWTs: [String: Bool] = [:]
        var exchanges = 0
        var codeChecks = 0
    }

    let state = Locked(State())
    let transport: ScriptedTransport
    static let jwt = JWTFixture.userJWT(endUserID: "user-from-jwt").text

    func issue(_ grant: String, twoFactor: Bool = false) {
        state.update {
            $0.grants[grant] = false
            if twoFactor { $0.twoFactorGrants.insert(grant) }
        }
    }

    var exchanges: Int { state.value.exchanges }
    var codeChecks: Int { state.value.codeChecks }

    init() {
        let state = self.state
        transport = ScriptedTransport { request in
            Self.answer(request, state)
        }
    }

    private static func answer(_ request: HTTPRequest, _ state: Locked<State>) -> HTTPResponse {
        let body = request.body.flatMap { try? JSONValue.parse($0) }
        func json(_ status: Int, _ text: String) -> HTTPResponse {
            HTTPResponse(status: status, body: Array(text.utf8), effectiveURL: request.url)
        }
        if request.url.hasSuffix(ClientAuthEndpoint.totpValidations.path) {
            return state.update { state in
                state.codeChecks += 1
                guard state.pendingJWTs[jwt] == false else { return json(401, #"{"error":"Unauthorized"}"#) }
                guard body?["code"]?.stringValue == "123456" else { return json(400, #"{"error":"invalid code"}"#) }
                state.pendingJWTs[jwt] = true
                return json(200, #"{"data":{"clientSessionToken":"totp-session-token"}}"#)
            }
        }
        let grant = body?["token"]?.stringValue ?? ""
        return state.update { state in
            guard let spent = state.grants[grant] else { return json(401, #"{"error":"Unauthorized"}"#) }
            guard !spent else { return json(400, #"{"error":"token already used"}"#) }
            state.grants[grant] = true
            state.exchanges += 1
            if state.twoFactorGrants.contains(grant) {
                state.pendingJWTs[jwt] = false
                return json(
                    200,
                    #"""
                    {"data":{"endUserId":"label-only","userJwt":"\#(jwt)",\#
                    "totpLink":"otpauth://totp/P?secret=GEZDGNBVGY3TQOJQ"}}
                    """#
                )
            }
            return json(200, #"{"data":{"endUserId":"user-1","clientSessionToken":"session-for-\#(grant)"}}"#)
        }
    }
}

@Suite("sign-in service")
struct SignInServiceTests {
    static let redirect = "myapp://auth/callback"
    static let now: Int64 = 1_700_000_000

    final class World {
        let portal = ScriptedPortal()
        /// The sessions' items; writes fail while `writeFailure` is set (a keyring that locks
        /// between the read and the write).
        let sessionItems = InMemoryItemStore()
        let stepItems = InMemoryItemStore()
        var sessions: Sessions { inMemorySessions(sessionItems) }
        var steps: TwoFactorStepItems { TwoFactorStepItems(stepItems) }
        func failWrites(_ failing: Bool) {
            sessionItems.writeFailure.withLock {
                $0 = failing ? StoreError(.locked, "keyring 'Login' is locked", hint: "unlock it") : nil
            }
        }
        let memory: InMemorySecretCache
        let forgetful: Bool
        var clock = SignInServiceTests.now

        init(memoryAvailable: Bool = true) {
            memory = InMemorySecretCache()
            forgetful = !memoryAvailable
        }

        /// A new service over the same stores: what a second process would build.
        func service() throws -> SignInService {
            SignInService(
                configuration: try ClientAuthFixture.configuration(redirectURL: SignInServiceTests.redirect),
                client: ClientAuthClient(
                    api: try ClientAuthFixture.api(redirectURL: SignInServiceTests.redirect),
                    transport: portal.transport),
                sessions: sessions, steps: steps, sessionLock: InProcessSessionLock(),
                signInLock: InProcessSessionLock(),
                memory: forgetful ? ForgetfulSecretCache() : memory, now: { [unowned self] in clock })
        }

        var stored: PortalSession? {
            if case .present(let session) = try? sessions.loadSession(authEnvironmentID: "env-1") { return session }
            return nil
        }
    }

    static func url(_ grant: String, _ marker: String = "authMethod=EMAIL_MAGIC_LINK") -> Secret {
        Secret("\(redirect)?token=\(grant)&\(marker)")
    }

    static func error<T>(_ body: () throws -> T) -> (any Error)? {
        do { _ = try body(); return nil } catch { return error }
    }

    @Test("a grant is exchanged once; the same URL in a new process resolves to the stored session")
    func replayAcrossProcesses() throws {
        let world = World()
        world.portal.issue("g1")
        guard case .signedIn(let session, let replayed) = try world.service().completeRedirect(Self.url("g1")) else {
            Issue.record("expected a session"); return
        }
        #expect(!replayed && session.endUserID == "user-1")
        #expect(world.stored?.token == Secret("session-for-g1"))
        #expect(world.stored?.grantDigest == GrantDigest.of(Secret("g1"), authEnvironmentID: "env-1"))
        #expect(world.stored?.issuedAt == Self.now)
        guard case .signedIn(let again, true) = try world.service().completeRedirect(Self.url("g1")) else {
            Issue.record("expected a replay"); return
        }
        #expect(again.token == Secret("session-for-g1"))
        #expect(world.portal.exchanges == 1 && world.portal.transport.requests.count == 1)
    }

    @Test("after sign-out the same grant reaches Portal, which refuses it as spent (exit 6)")
    func replayAfterSignOut() throws {
        let world = World()
        world.portal.issue("g1")
        _ = try world.service().completeRedirect(Self.url("g1"))
        _ = try world.sessions.deleteSession(authEnvironmentID: "env-1")
        try SignInService.forget(authEnvironmentID: "env-1", steps: world.steps, memory: world.memory)
        let error = Self.error { try world.service().completeRedirect(Self.url("g1")) } as? ClientAuthError
        #expect(error == .clientError(.magicLinkValidations, status: 400, serverMessage: "token already used"))
        #expect(error?.exitCode == .rejected)
        #expect(world.portal.transport.requests.count == 2)
    }

    @Test("another grant replaces the memory: A, B, A exchanges three times")
    func newGrantReplaces() throws {
        let world = World()
        world.portal.issue("a")
        world.portal.issue("b", twoFactor: false)
        _ = try world.service().completeRedirect(Self.url("a", "login_type=GOOGLE"))
        _ = try world.service().completeRedirect(Self.url("b", "login_type=APPLE"))
        #expect(
            Self.error { try world.service().completeRedirect(Self.url("a", "login_type=GOOGLE")) } is ClientAuthError)
        #expect(world.portal.transport.requests.count == 3)
        #expect(world.portal.transport.requests.allSatisfy { $0.url.hasSuffix("/api/v3/auth/oauth/tokens") })
    }

    @Test("an error parameter or a URL that is not ours sends nothing")
    func nothingSent() throws {
        let world = World()
        let failed = Self.error {
            try world.service().completeRedirect(
                Secret("\(Self.redirect)?token=g&authMethod=EMAIL_MAGIC_LINK&error=denied"))
        }
        #expect(failed as? ClientAuthError == .authenticationFailed("denied"))
        for (url, reason) in [
            ("otherapp://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK", RedirectURL.NotOursReason.otherTarget),
            ("\(Self.redirect)?token=g", .noMethodMarker), ("\(Self.redirect)?token=", .noGrant), ("", .emptyOrTooLong),
        ] {
            #expect(
                Self.error { try world.service().completeRedirect(Secret(url)) } as? SignInError
                    == .notARedirect(reason))
        }
        #expect(world.portal.transport.requests.isEmpty)
    }

    @Test(
        """
        a session Portal gave but the store refused waits in memory; the same URL again finishes the write with no \
        request
        """
    )
    func persistFailureThenRedelivery() throws {
        let world = World()
        world.portal.issue("g1")
        world.failWrites(true)
        let refused = Self.error { try world.service().completeRedirect(Self.url("g1")) } as? SignInError
        guard case .notStored(_, "user-1", .session, kept: true) = refused else {
            Issue.record("\(String(describing: refused))"); return
        }
        #expect(refused?.hint?.contains("open the same sign-in link again") == true)
        #expect(world.stored == nil)
        // Still failing: still kept, still no second exchange.
        #expect(Self.error { try world.service().completeRedirect(Self.url("g1")) } is SignInError)
        world.failWrites(false)
        guard case .signedIn(let session, true) = try world.service().completeRedirect(Self.url("g1")) else {
            Issue.record("expected the kept session"); return
        }
        #expect(session.token == Secret("session-for-g1"))
        #expect(world.stored?.grantDigest == GrantDigest.of(Secret("g1"), authEnvironmentID: "env-1"))
        #expect(world.portal.transport.requests.count == 1)
        #expect(world.sessionItems.writes.withLock { $0 } == 3)
        #expect(world.memory.names.isEmpty)
    }

    @Test("without a memory to keep it in, the hint says to sign in again")
    func persistFailureWithoutMemory() throws {
        let world = World(memoryAvailable: false)
        world.portal.issue("g1")
        world.failWrites(true)
        let refused = Self.error { try world.service().completeRedirect(Self.url("g1")) } as? SignInError
        guard case .notStored(_, _, _, kept: false) = refused else {
            Issue.record("\(String(describing: refused))"); return
        }
        #expect(refused?.hint?.hasSuffix("sign in again with 'portal-token login'") == true)
    }

    @Test("a two-factor step: end user from the userJwt, kept without the totpLink, completed by a code")
    func twoFactor() throws {
        let world = World()
        world.portal.issue("g2", twoFactor: true)
        guard
            case .twoFactorRequired(let step, let enrollment, nil, false) = try world.service().completeRedirect(
                Self.url("g2"))
        else {
            Issue.record("expected a two-factor step"); return
        }
        #expect(step.endUserID == "user-from-jwt")
        #expect(enrollment?.text.hasPrefix("otpauth://") == true)
        #expect(step.expiresAt == Self.now + 600)
        let kept = try #require(try world.steps.loadStep(authEnvironmentID: "env-1"))
        #expect(kept == step && !kept.payload.text.contains("otpauth"))
        // The same URL again: the waiting step, no request.
        guard case .twoFactorRequired(_, nil, nil, true) = try world.service().completeRedirect(Self.url("g2")) else {
            Issue.record("expected the waiting step"); return
        }
        #expect(world.portal.exchanges == 1)

        let service = try world.service()
        let pending = try service.pendingStep()
        #expect(
            (Self.error { try service.verify(code: "12345", for: pending) } as? ClientAuthError)
                == .invalidArgument(.totpCode))
        #expect(world.portal.codeChecks == 0)
        let wrong = Self.error { try service.verify(code: "000000", for: pending) } as? ClientAuthError
        #expect(wrong?.isRejectedCode == true)
        let session = try service.verify(code: " 123456 ", for: pending)
        #expect(session.endUserID == "user-from-jwt" && session.token == Secret("totp-session-token"))
        #expect(world.stored?.grantDigest == step.grantDigest)
        #expect(try world.steps.loadStep(authEnvironmentID: "env-1") == nil)
        // The redirect delivered once more resolves to the session the code produced.
        guard case .signedIn(_, true) = try world.service().completeRedirect(Self.url("g2")) else {
            Issue.record("expected a replay"); return
        }
        #expect(world.portal.transport.requests.count == 3)
    }

    @Test("a code accepted but not stored is finished later without a code or a request")
    func acceptedCodeNotStored() throws {
        let world = World()
        world.portal.issue("g2", twoFactor: true)
        _ = try world.service().completeRedirect(Self.url("g2"))
        let service = try world.service()
        let step = try service.pendingStep()
        world.failWrites(true)
        let refused = Self.error { try service.verify(code: "123456", for: step) } as? SignInError
        guard case .notStored(_, "user-from-jwt", .twoFactorCode, kept: true) = refused else {
            Issue.record("\(String(describing: refused))"); return
        }
        #expect(refused?.hint?.contains("verify-totp") == true)
        world.failWrites(false)
        world.clock += 3600
        let later = try world.service()
        let again = try later.pendingStep()
        let session = try #require(try later.finishAcceptedCode(for: again))
        #expect(session.token == Secret("totp-session-token"))
        #expect(world.portal.codeChecks == 1)
    }

    @Test("an expired step is removed and reported")
    func expiredStep() throws {
        let world = World()
        world.portal.issue("g2", twoFactor: true)
        _ = try world.service().completeRedirect(Self.url("g2"))
        world.clock += 600
        #expect(
            Self.error { try world.service().pendingStep() } as? SignInError == .stepExpired(endUserID: "user-from-jwt")
        )
        #expect(
            Self.error { try world.service().pendingStep() } as? SignInError
                == .noPendingStep(authEnvironmentID: "env-1"))
    }

    @Test("a step that cannot be kept is reported and waits in memory; the URL again keeps it with no request")
    func stepNotKept() throws {
        let world = World()
        world.portal.issue("g2", twoFactor: true)
        world.stepItems.writeFailure.withLock { $0 = StoreError(.failed, "disk full") }
        guard case .twoFactorRequired(_, _, let notKept?, false) = try world.service().completeRedirect(Self.url("g2"))
        else {
            Issue.record("expected a step not kept"); return
        }
        guard case .notStored(_, _, .twoFactorStep, kept: true) = notKept else { Issue.record("\(notKept)"); return }
        world.stepItems.writeFailure.withLock { $0 = nil }
        guard case .twoFactorRequired(_, nil, nil, true) = try world.service().completeRedirect(Self.url("g2")) else {
            Issue.record("expected the kept step"); return
        }
        #expect(try world.steps.loadStep(authEnvironmentID: "env-1") != nil)
        #expect(world.portal.exchanges == 1)
    }

    @Test("a userJwt that names no end user is refused before anything is kept")
    func badUserJWT() throws {
        let world = World()
        let transport = ScriptedTransport(status: 200, json: #"{"data":{"userJwt":"not-a-jwt"}}"#)
        let service = SignInService(
            configuration: try ClientAuthFixture.configuration(redirectURL: Self.redirect),
            client: ClientAuthClient(api: try ClientAuthFixture.api(redirectURL: Self.redirect), transport: transport),
            sessions: world.sessions, steps: world.steps, sessionLock: InProcessSessionLock(),
            signInLock: InProcessSessionLock(),
            memory: world.memory, now: { Self.now })
        #expect(
            Self.error { try service.completeRedirect(Self.url("g")) } as? ClientAuthError
                == .invalidUserJWT(.malformed))
        #expect(try world.steps.loadStep(authEnvironmentID: "env-1") == nil && world.memory.names.isEmpty)
    }
}
