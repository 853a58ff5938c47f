import PortalTokenCore
import Testing

private let issued: Int64 = 1_700_000_000

private func session(issuedAt: Int64? = issued, lastActivityAt: Int64? = issued) -> PortalSession {
    PortalSession(
        token: Secret("session-token"), endUserID: "user-1", authEnvironmentID: "env-1",
        issuedAt: issuedAt, lastActivityAt: lastActivityAt)
}

@Suite("session record")
struct PortalSessionTests {
    @Test("the payload holds the SDK's two keys, sorted, plus the timing fields")
    func payload() {
        #expect(
            session(issuedAt: nil, lastActivityAt: nil).payload.text
                == #"{"clientSessionToken":"session-token","endUserId":"user-1"}"#)
        #expect(
            session().payload.text
                == #"""
                {"clientSessionToken":"session-token","endUserId":"user-1","issuedAt":1700000000,\#
                "lastActivityAt":1700000000}
                """#
        )
    }

    @Test("a payload round-trips")
    func roundTrip() {
        #expect(PortalSession.decode(payload: session().payload, authEnvironmentID: "env-1") == session())
    }

    @Test(
        "the SDK's two-key payload reads with unknown timing",
        arguments: [
            #"{"clientSessionToken":"session-token","endUserId":"user-1"}"#,
            #"{"endUserId":"user-1","clientSessionToken":"session-token","clientId":"c","extra":[1,{"a":null}]}"#,
            #"{"clientSessionToken":"session-token","endUserId":"user-1","issuedAt":"yesterday"}"#,
        ])
    func sdkPayload(payload: String) throws {
        let decoded = try #require(PortalSession.decode(payload: Secret(payload), authEnvironmentID: "env-1"))
        #expect(decoded.token == Secret("session-token"))
        #expect(decoded.endUserID == "user-1")
        #expect(decoded.issuedAt == nil && decoded.lastActivityAt == nil)
    }

    @Test(
        "unusable payloads are refused (docs/portal-api.md)",
        arguments: [
            "{not json", #"{"clientSessionToken":"stored-token"}"#, #"{"clientSessionToken":"","endUserId":"u"}"#,
            #"{"clientSessionToken":"t","endUserId":"   "}"#, #"{"clientSessionToken":" \n ","endUserId":"u"}"#,
            #"{"clientSessionToken":1,"endUserId":"u"}"#, #"["t","u"]"#, "", "null", #"{"data":null}"#,
        ])
    func unusablePayloads(payload: String) {
        #expect(PortalSession.decode(payload: Secret(payload), authEnvironmentID: "env-1") == nil)
    }

    @Test("a non-UTF-8 payload is unusable")
    func nonUTF8() {
        #expect(PortalSession.decode(payload: Secret(bytes: [0x7B, 0xFF, 0xFE, 0x7D]), authEnvironmentID: "e") == nil)
    }

    @Test("the token never shows in a rendering")
    func redaction() {
        #expect(!String(describing: session()).contains("session-token"))
        #expect(!String(reflecting: session()).contains("session-token"))
    }
}

@Suite("expiry policy")
struct SessionPolicyTests {
    static let hour: Int64 = 3600
    static let boundaries: [(Int64, SessionDecision)] = [
        (0, .handOut),
        (23 * hour, .handOut),
        (24 * hour - 1, .handOut),
        (24 * hour, .checkWithPortal),
        (25 * hour, .checkWithPortal),
        (7 * 24 * hour - 1, .checkWithPortal),
        (7 * 24 * hour, .expired),
        (8 * 24 * hour, .expired),
    ]

    @Test(
        "before the idle window ends the token is handed out; after it Portal decides; at the cap it ends",
        arguments: boundaries)
    func decision(elapsed: Int64, expected: SessionDecision) {
        #expect(session().decision(at: issued + elapsed) == expected)
    }

    @Test("activity slides the expiry, but never past the 7-day cap")
    func sliding() {
        let slid = session().accepted(at: issued + 6 * 24 * 3600 + 3600)
        #expect(slid.lastActivityAt == issued + 6 * 24 * 3600 + 3600)
        #expect(slid.expiresAt == issued + 7 * 24 * 3600)
        #expect(slid.decision(at: issued + 6 * 24 * 3600 + 7200) == .handOut)
        #expect(slid.decision(at: issued + 7 * 24 * 3600) == .expired)
    }

    @Test("a record with unknown timing is checked with Portal, and its cap starts when accepted")
    func unknownTiming() {
        let unknown = session(issuedAt: nil, lastActivityAt: nil)
        #expect(unknown.decision(at: issued) == .checkWithPortal)
        let accepted = unknown.accepted(at: issued)
        #expect(accepted.issuedAt == issued && accepted.expiresAt == issued + 24 * 3600)
    }
}

@Suite("RFC 3339 times")
struct RFC3339Tests {
    @Test(
        "formats Unix seconds in UTC",
        arguments: [
            (Int64(0), "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_700_000_000, "2023-11-14T22:13:20Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
            (-1, "1969-12-31T23:59:59Z"),
        ])
    func format(seconds: Int64, expected: String) {
        #expect(RFC3339.format(seconds) == expected)
        #expect(RFC3339.parse(expected) == seconds)
    }

    @Test("reads back only what it writes", arguments: ["", "2023-11-14 22:13:20Z", "2023-13-01T00:00:00Z", "x"])
    func refuses(text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}

@Suite("JSON")
struct JSONTests {
    @Test("parses what RFC 8259 allows")
    func parses() throws {
        let value = try JSONValue.parse(
            #" {"a": [1, -2.5e3, true, false, null], "s": "\u00e9\ud83d\ude00\n\"\/", "o": {}} "#)
        #expect(value["a"]?.arrayValue?.count == 5)
        #expect(value["a"]?.arrayValue?.first?.int64Value == 1)
        #expect(value["s"]?.stringValue == "é😀\n\"/")
        #expect(value["o"] == .object([:]))
    }

    @Test(
        "refuses what it does not allow",
        arguments: [
            "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "tru", "\"\\x\"", "\"a\u{01}\"", "\"\\ud800\"", "{} x",
            "{'a':1}",
            String(repeating: "[", count: 200) + String(repeating: "]", count: 200),
        ])
    func refuses(text: String) {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(text) }
    }

    @Test("writes compact JSON with sorted keys and escapes")
    func writes() {
        let value = JSONValue.object(["b": .string("x\"\n\u{01}"), "a": .array([.int(1), .bool(true), .null])])
        #expect(value.serialized == #"{"a":[1,true,null],"b":"x\"\n\u0001"}"#)
    }

    @Test("escapes DEL and the C1 controls a terminal would obey, and keeps other text as it is")
    func escapesTerminalControls() throws {
        let text = "a\u{7f}b\u{85}c\u{a0}é\u{9f}"
        let written = JSONValue.string(text).serialized
        #expect(written == "\"a\\u007fb\\u0085c\u{a0}é\\u009f\"")
        #expect(try JSONValue.parse(written) == .string(text))
    }

    @Test("the pull reader reads a secret and skips members it does not know, nested ones included")
    func pullReader() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("extra")
        try JSONValue.parse(#"{"deep":[1,"x",{"y":null}],"flag":false}"#).write(to: &writer)
        writer.key("password")
        writer.string(Secret("p\"w\u{1}"))
        writer.key("n")
        writer.number(42)
        writer.endObject()
        var reader = JSONReader(writer.bytes)
        var password: Secret?
        var number: Int64?
        try reader.object { reader, name throws(JSONError) in
            switch name {
            case "password": password = try reader.secret()
            case "n": number = try reader.int64()
            default: try reader.skipValue()
            }
        }
        try reader.end()
        #expect(password?.withBytes { Array($0) } == Array("p\"w\u{1}".utf8))
        #expect(number == 42)
    }
}
