import PortalTokenCore
import Testing

/// Builds tokens for the tests: base64url without padding, unless asked otherwise.
enum JWTFixture {
    static func base64(
        _ bytes: [UInt8], alphabet: String = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
        padded: Bool = false
    ) -> String {
        let table = Array(alphabet)
        var output = ""
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << UInt32(16 - 8 * $1.offset) }
            let characters = chunk.count + 1
            for position in 0..<characters { output.append(table[Int(value >> UInt32(18 - 6 * position) & 63)]) }
            if padded { output += String(repeating: "=", count: 4 - characters) }
            index += 3
        }
        return output
    }

    static func segment(_ json: String) -> String { base64(Array(json.utf8)) }

    static func token(claims json: String) -> String {
        segment(#"{"alg":"HS256","typ":"JWT"}"#) + "." + segment(json) + ".c2lnbmF0dXJl"
    }

    static func userJWT(endUserID: String) -> Secret {
        Secret(token(claims: #"{"endUserId":"\#(endUserID)","environmentId":"env-1"}"#))
    }
}

/// See docs/portal-api.md, "The two-factor token".
@Suite("userJwt claims")
struct UserJWTTests {
    static func read(_ token: String) -> Result<String, UserJWT.Problem> {
        do {
            return .success(try UserJWT.endUserID(in: Secret(token)))
        } catch {
            guard case .invalidUserJWT(let problem) = error else { fatalError("unexpected \(error)") }
            return .failure(problem)
        }
    }

    @Test("a realistic token names its end user")
    func realistic() {
        let claims =
            #"""
            {"endUserId":"cmqv6xewt000dt7rdmgex5vfz","environmentId":"env-1","iat":1736150400,"exp":1736151000,\#
            "aud":"portal","iss":"https://api.portalhq.io"}
            """#
        #expect(Self.read(JWTFixture.token(claims: claims)) == .success("cmqv6xewt000dt7rdmgex5vfz"))
    }

    @Test("the claims segment wins over header and signature")
    func claimsWin() {
        let other = JWTFixture.segment(#"{"endUserId":"from-header"}"#)
        let token = other + "." + JWTFixture.segment(#"{"endUserId":"from-claims"}"#) + "." + other
        #expect(Self.read(token) == .success("from-claims"))
    }

    @Test("both base64 alphabets, mixed and padded, decode")
    func alphabets() {
        let claims = Array(#"{"endUserId":"?ab>cd"}"#.utf8)
        let url = JWTFixture.base64(claims)
        let standard = JWTFixture.base64(
            claims, alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        #expect(url.contains("-") || url.contains("_"))
        #expect(standard.contains("+") || standard.contains("/"))
        #expect(Self.read("h." + url + ".s") == .success("?ab>cd"))
        #expect(Self.read("h." + standard + ".s") == .success("?ab>cd"))
        // Mixed: the standard and URL alphabets within one segment.
        let mixedClaims = Array(#"{"endUserId":">aa>a"}"#.utf8)
        let mixedURL = Array(JWTFixture.base64(mixedClaims))
        let mixedStandard = Array(
            JWTFixture.base64(mixedClaims, alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        )
        let half = mixedURL.count / 2
        let mixed = String(mixedStandard[..<half]) + String(mixedURL[half...])
        #expect(Self.read("h." + mixed + ".s") == .success(">aa>a"))
        for length in 1...3 {
            let claims = Array((#"{"endUserId":"u"}"# + String(repeating: " ", count: length)).utf8)
            #expect(Self.read("h." + JWTFixture.base64(claims, padded: true) + ".s") == .success("u"))
        }
    }

    @Test("two segments are enough and segments past the third are ignored")
    func segmentCounts() {
        let claims = JWTFixture.segment(#"{"endUserId":"u"}"#)
        #expect(Self.read("header." + claims) == .success("u"))
        #expect(Self.read("a." + claims + ".c.d") == .success("u"))
    }

    @Test("a token that is not a JWT is malformed", arguments: ["not-a-jwt", "", "   "])
    func malformed(token: String) {
        #expect(Self.read(token) == .failure(.malformed))
    }

    @Test(
        "a claims segment outside both alphabets is not base64url",
        arguments: [
            "header.not!valid!base64.signature", "header.not*valid*base64.sig", "header.ey Jh.signature",
        ])
    func notBase64(token: String) {
        #expect(Self.read(token) == .failure(.notBase64URL))
    }

    @Test(
        "claims that are not a JSON object are unreadable",
        arguments: [
            "h." + JWTFixture.segment("this is not json {") + ".s",
            "header..sig",
            "header.A.sig",
            "h." + JWTFixture.segment(#"["user-1"]"#) + ".s",
            "h." + JWTFixture.base64([0xFF, 0xFE]) + ".s",
        ])
    func unreadable(token: String) {
        #expect(Self.read(token) == .failure(.unreadableClaims))
    }

    @Test(
        "claims without a non-blank string endUserId name no end user",
        arguments: [
            #"{"environmentId":"env-1"}"#, #"{"endUserId":""}"#, #"{"endUserId":"   "}"#, #"{"endUserId":null}"#,
            #"{"endUserId":619692}"#, #"{"endUserId":true}"#, #"{"endUserId":{"id":"u"}}"#, #"{"endUserId":["u"]}"#,
            #"{"id":"u"}"#, #"{"nonce":"n"}"#,
        ])
    func missing(claims: String) {
        #expect(Self.read(JWTFixture.token(claims: claims)) == .failure(.missingEndUserID))
    }

    @Test("huge inputs finish in linear time")
    func huge() {
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect(
                Self.read("header.AAAA" + String(repeating: "=", count: 200_000) + ".signature")
                    == .failure(.unreadableClaims))
            let filler = String(repeating: "f", count: 200_000)
            #expect(
                Self.read(JWTFixture.token(claims: #"{"filler":"\#(filler)","endUserId":"u-1"}"#)) == .success("u-1"))
        }
        #expect(elapsed < .seconds(2))
    }

    @Test("no message repeats the token", arguments: UserJWT.Problem.allCases)
    func messages(problem: UserJWT.Problem) {
        let error = ClientAuthError.invalidUserJWT(problem)
        #expect(!error.message.contains("header"))
        #expect(error.message.hasPrefix("the two-factor token from Portal is unusable: "))
        #expect(!error.message.hasSuffix("."))
        #expect(error.exitCode == .rejected)
    }
}
