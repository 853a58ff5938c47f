import Basics
import PortalTokenCore
import Testing

/// Delegated credentials as values: the text form read strictly, the HMAC chain, what caveats
/// refuse, and that no derivation widens what its parent allows.
@Suite("delegated credentials")
struct DelegatedCredentialTests {
    static let key = Secret(bytes: Array(repeating: 7, count: 32))
    static let now: Int64 = 1_800_000_000
    static let sandbox = CallerIdentity(
        uid: 1000, gid: 1000, pid: 4343, sameUserNamespace: true, cgroup: "/system.slice/ci-7.service")

    static func request(
        _ method: String = "GET", _ path: String = "/api/v3/clients/me", environment: String? = "env-a",
        caller: CallerIdentity? = nil, now: Int64 = now
    ) -> DelegatedCredential.Request {
        DelegatedCredential.Request(
            method: method, path: path[...], environment: environment, caller: caller, now: now)
    }

    static func root(_ caveats: [DelegatedCredential.Caveat]) -> DelegatedCredential {
        DelegatedCredential.mint(key: key, id: "00112233aabbccdd", caveats: [.expires(now + 600)] + caveats)
    }

    @Test("a minted credential reads back from its text, verifies under its key and no other")
    func roundTrip() throws {
        let credential = Self.root([.methods(["GET"]), .paths(["/api/v3/clients/me"]), .environment("env-a")])
        let text = credential.text.text
        #expect(text.hasPrefix("ptd1."))
        let read = try #require(DelegatedCredential(text: Array(text.utf8)))
        #expect(read == credential)
        #expect(read.chain == ["00112233aabbccdd"])
        #expect(read.expires == Self.now + 600)
        #expect(read.verify(Self.request(), keys: [Self.key]) == .passes(chain: ["00112233aabbccdd"], uses: [:]))
        let other = Secret(bytes: Array(repeating: 8, count: 32))
        #expect(read.verify(Self.request(), keys: [other]) == .refused("the credential's signature does not verify"))
        #expect(
            read.verify(Self.request(), keys: [other, Self.key]) == .passes(chain: ["00112233aabbccdd"], uses: [:]))
    }

    @Test("every caveat refuses what it excludes: expiry, method, path, environment, caller")
    func caveatsRefuse() {
        let credential = Self.root([
            .methods(["GET", "HEAD"]), .paths(["/api/v3/clients/me", "/api/v3/clients/me/wallets/*"]),
            .environment("env-a"),
        ])
        let keys = [Self.key]
        func passes(_ request: DelegatedCredential.Request) -> Bool {
            if case .passes = credential.verify(request, keys: keys) { return true }
            return false
        }
        #expect(passes(Self.request()))
        #expect(passes(Self.request("HEAD", "/api/v3/clients/me/wallets/w-1")))
        #expect(!passes(Self.request(now: Self.now + 600)))
        #expect(!passes(Self.request("POST")))
        #expect(!passes(Self.request("GET", "/api/v3/clients/me/other")))
        #expect(!passes(Self.request("GET", "/api/v3/clients/me/wallets")))
        #expect(!passes(Self.request("GET", "/api/v3/clients/me/wallets/")))
        #expect(!passes(Self.request("GET", "/api/v3/clients/me/wallets/../../auth")))
        #expect(!passes(Self.request("GET", "/api/v3/clients/me/wallets/%2e%2e")))
        #expect(!passes(Self.request(environment: "env-b")))
        #expect(!passes(Self.request(environment: nil)))
        // Left to the proxy upstream (the agent's, in client mode), and nothing else with it.
        var deferred = Self.request(environment: nil)
        deferred.environmentJudgedUpstream = true
        #expect(passes(deferred))
        deferred.method = "POST"
        #expect(!passes(deferred))

        let bound = Self.root([.caller(.unit("ci-*.service"))])
        if case .refused(let reason) = bound.verify(Self.request(), keys: keys) {
            #expect(reason.contains("loopback"))
        } else {
            Issue.record("a caller caveat passed with no caller")
        }
        var other = Self.sandbox
        other.cgroup = "/system.slice/deploy.service"
        #expect(bound.verify(Self.request(caller: other), keys: keys) != .passes(chain: bound.chain, uses: [:]))
        #expect(bound.verify(Self.request(caller: Self.sandbox), keys: keys) == .passes(chain: bound.chain, uses: [:]))
    }

    @Test("a credential without an expiry is refused, even with a valid signature")
    func expiryRequired() {
        let credential = DelegatedCredential.mint(key: Self.key, id: "00112233aabbccdd", caveats: [.methods(["GET"])])
        #expect(credential.verify(Self.request(), keys: [Self.key]) == .refused("the credential has no expiry"))
    }

    @Test("uses are counted per credential of the chain: the tightest bound of each")
    func uses() {
        let parent = Self.root([.uses(5), .uses(3)])
        let child = parent.narrowed(id: "ffeeddccbbaa9988", by: [.uses(2)])
        #expect(
            child.verify(Self.request(), keys: [Self.key])
                == .passes(
                    chain: ["00112233aabbccdd", "ffeeddccbbaa9988"],
                    uses: ["00112233aabbccdd": 3, "ffeeddccbbaa9988": 2]))
        #expect(child.links.map(\.parent) == [nil, "00112233aabbccdd"])
    }

    @Test("one byte changed, a caveat removed, lines reordered or a foreign line: refused or unreadable")
    func tampering() throws {
        let credential = Self.root([.methods(["GET"]), .paths(["/api/v3/clients/me"])])
            .narrowed(id: "ffeeddccbbaa9988", by: [.expires(Self.now + 60)])
        let text = Array(credential.text.text.utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for index in DelegatedCredential.prefix.utf8.count..<text.count {
            var changed = text
            changed[index] = alphabet.first { $0 != text[index] }!
            if let read = DelegatedCredential(text: changed) {
                #expect(!read.isSigned(by: Self.key), "byte \(index) changed still verifies")
            }
        }
        // The body without its tag: lines, a NUL, then 32 bytes.
        let body = try #require(Base64.decode(text.dropFirst(5)))
        let tag = Array(body.suffix(32))
        let lines = String(decoding: body.dropLast(33), as: UTF8.self).split(separator: "\n").map(String.init)
        func forged(_ lines: [String]) -> DelegatedCredential? {
            DelegatedCredential(
                text: Array("ptd1.".utf8) + Base64.encodeURL(Array(lines.joined(separator: "\n").utf8) + [0] + tag))
        }
        for index in 1..<lines.count {
            var fewer = lines
            fewer.remove(at: index)
            if let read = forged(fewer) {
                #expect(!read.isSigned(by: Self.key), "line \(index) removed still verifies")
            }
        }
        if let read = forged([lines[0], lines[2], lines[1]] + lines[3...]) { #expect(!read.isSigned(by: Self.key)) }
        #expect(forged(lines + ["scope everything"]) == nil)
        #expect(forged(["derived ffeeddccbbaa9988"] + lines.dropFirst()) == nil)
        #expect(forged(lines.dropFirst(0) + ["id 0011223344556677"]) == nil)
        #expect(DelegatedCredential(text: Array("ptd1.".utf8)) == nil)
        #expect(DelegatedCredential(text: Array(credential.text.text.dropFirst(5).utf8)) == nil)
        #expect(forged(lines)?.isSigned(by: Self.key) == true)
        // The same bytes in another spelling (unused low bits of the last character set) are not read.
        for extra in 0..<3 {
            let padded = credential.narrowed(
                id: "ffeeddccbbaa9988", by: [.environment("env-" + String(repeating: "a", count: extra))])
            let spelled = Array(padded.text.text.utf8)
            guard (spelled.count - 5) % 4 != 0, let last = alphabet.firstIndex(of: spelled.last!), last % 2 == 0 else {
                continue
            }
            var other = spelled
            other[other.count - 1] = alphabet[last + 1]
            #expect(Base64.decode(other.dropFirst(5)) == Base64.decode(spelled.dropFirst(5)))
            #expect(DelegatedCredential(text: other) == nil)
        }
    }

    @Test("no derivation widens: over random chains, whatever a derived credential passes its parent passes")
    func attenuationNeverWidens() {
        var generator = SystemRandomNumberGenerator()
        let methods = ProxyRules.defaultMethods
        let paths = [
            "/api/v3/clients/me", "/api/v3/clients/me/*", "/api/v3/clients/me/wallets", "/api/v3/clients/me/wallets/*",
            "/api/v3/other",
        ]
        let requestPaths = [
            "/api/v3/clients/me", "/api/v3/clients/me/wallets", "/api/v3/clients/me/wallets/w-1", "/api/v3/other",
            "/api/v3/other/x",
        ]
        func randomCaveat() -> DelegatedCredential.Caveat {
            switch Int.random(in: 0..<5, using: &generator) {
            case 0: return .expires(Self.now + Int64.random(in: -10...900, using: &generator))
            case 1:
                return .methods(
                    Array(methods.shuffled(using: &generator).prefix(Int.random(in: 1...3, using: &generator))))
            case 2:
                return .paths(Array(paths.shuffled(using: &generator).prefix(Int.random(in: 1...2, using: &generator))))
            case 3: return .environment(Bool.random(using: &generator) ? "env-a" : "env-b")
            default: return .caller(.uid(Bool.random(using: &generator) ? 1000 : 1001))
            }
        }
        func passes(_ credential: DelegatedCredential, _ request: DelegatedCredential.Request) -> Bool {
            if case .passes = credential.verify(request, keys: [Self.key]) { return true }
            return false
        }
        var narrowedSome = 0
        for _ in 0..<300 {
            var chain = [Self.root((0..<Int.random(in: 0...2, using: &generator)).map { _ in randomCaveat() })]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let caveats = (0..<Int.random(in: 0...3, using: &generator)).map { _ in randomCaveat() }
                let text = chain.last!.narrowed(id: DelegatedCredential.makeID(), by: caveats).text
                // Derived offline and handed on as text, as a holder would.
                chain.append(DelegatedCredential(text: text.withBytes { Array($0) })!)
            }
            for _ in 0..<20 {
                var caller = Self.sandbox
                caller.uid = Bool.random(using: &generator) ? 1000 : 1001
                let request = Self.request(
                    methods.randomElement(using: &generator)!, requestPaths.randomElement(using: &generator)!,
                    environment: Bool.random(using: &generator) ? "env-a" : "env-b", caller: caller,
                    now: Self.now + Int64.random(in: 0...900, using: &generator))
                for (parent, child) in zip(chain, chain.dropFirst()) {
                    if passes(child, request) {
                        #expect(passes(parent, request), "\(child.lines) passed what \(parent.lines) refused")
                    } else if passes(parent, request) {
                        narrowedSome += 1
                    }
                }
            }
        }
        // The chains were not all vacuous: some derivations refused what their parents passed.
        #expect(narrowedSome > 100)
    }

    @Test("base64url without padding round-trips every length, and ids are 16 lowercase hex digits")
    func encoding() {
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
            let encoded = Base64.encodeURL(bytes)
            #expect(!encoded.contains(UInt8(ascii: "=")) && !encoded.contains(UInt8(ascii: "+")))
            #expect(Base64.decode(encoded) == bytes)
        }
        let id = DelegatedCredential.makeID()
        #expect(DelegatedCredential.isID(id))
        #expect(!DelegatedCredential.isID("00112233AABBCCDD"))
        #expect(!DelegatedCredential.isID("0011"))
    }

    @Test("the root key is the session's: another token's credentials do not verify")
    func rootKeyFollowsTheSession() {
        let first = PortalSession(
            token: Secret("one"), endUserID: "u", authEnvironmentID: "e", issuedAt: 1, lastActivityAt: 1)
        var second = first
        second.token = Secret("two")
        let credential = DelegatedCredential.mint(
            key: DelegatedCredential.rootKey(of: first), id: "00112233aabbccdd", caveats: [.expires(Self.now + 1)])
        #expect(credential.isSigned(by: DelegatedCredential.rootKey(of: first)))
        #expect(!credential.isSigned(by: DelegatedCredential.rootKey(of: second)))
    }
}
