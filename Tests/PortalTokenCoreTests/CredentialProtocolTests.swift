import PortalTokenCore
import Testing

private func parse(_ text: String) throws -> CredentialRequest {
    try CredentialProtocol.parse(Array(text.utf8))
}

@Suite("credential protocol reader")
struct CredentialProtocolReaderTests {
    @Test("reads the attributes git sends")
    func readsKnownAttributes() throws {
        let request = try parse(
            """
            protocol=https\nhost=example.com:8443\npath=repo.git\nusername=alice\npassword=secret\n\
            password_expiry_utc=1700000000\noauth_refresh_token=refresh\n
            """
        )
        #expect(request.protocolName == "https")
        #expect(request.host == CredentialHost(server: "example.com", port: 8443))
        #expect(request.path == "repo.git")
        #expect(request.username == "alice")
        #expect(request.password == Secret("secret"))
        #expect(request.passwordExpiresAt == 1_700_000_000)
        #expect(request.oauthRefreshToken == Secret("refresh"))
        #expect(request.hasAttributes)
    }

    @Test("stops at the first blank line")
    func stopsAtBlankLine() throws {
        let request = try parse("protocol=https\n\nhost=ignored\n")
        #expect(request.protocolName == "https")
        #expect(request.host == nil)
    }

    @Test("accepts a last line without a newline")
    func acceptsUnterminatedLastLine() throws {
        #expect(try parse("protocol=https\nhost=example.com").host?.server == "example.com")
    }

    @Test("ignores unknown keys, including ones that embed other attributes")
    func ignoresUnknownKeys() throws {
        let challenge = "Basic realm=\"host=evil.example\" " + String(repeating: "x", count: 1024)
        let request = try parse(
            "capability[]=authtype\nwwwauth[]=\(challenge)\nprotocol=https\nhost=example.com\nstate[]=a=b\n")
        #expect(request.host?.server == "example.com")
        #expect(request.protocolName == "https")
    }

    @Test("a later value of the same key replaces the earlier one")
    func laterValueWins() throws {
        #expect(try parse("host=a.example\nhost=b.example\n").host?.server == "b.example")
    }

    @Test("accepts lines of 64 KiB and more")
    func acceptsLongLines() throws {
        let password = String(repeating: "p", count: 70 * 1024)
        let request = try parse("protocol=https\nhost=example.com\npassword=\(password)\n")
        #expect(request.password?.byteCount == 70 * 1024)
    }

    @Test("an empty input, or a lone blank line, carries no attribute")
    func emptyInputHasNoAttributes() throws {
        #expect(try parse("").hasAttributes == false)
        #expect(try parse("\n").hasAttributes == false)
        #expect(try parse("\nprotocol=https\n").hasAttributes == false)
    }

    @Test("refuses a value containing CR, naming the line and not the value")
    func refusesCarriageReturn() throws {
        #expect(throws: CredentialProtocolError.forbiddenCharacter(line: 2, character: "CR")) {
            try parse("protocol=https\npassword=sec\rret\n")
        }
        let message = CredentialProtocolError.forbiddenCharacter(line: 2, character: "CR").message
        #expect(!message.contains("sec"))
    }

    @Test("refuses a value containing NUL")
    func refusesNul() throws {
        #expect(throws: CredentialProtocolError.forbiddenCharacter(line: 1, character: "NUL")) {
            try CredentialProtocol.parse([UInt8]("password=a".utf8) + [0] + [UInt8]("b\n".utf8))
        }
    }

    @Test("refuses a line without '=' and does not echo it")
    func refusesLineWithoutSeparator() throws {
        #expect(throws: CredentialProtocolError.missingSeparator(line: 2)) {
            try parse("protocol=https\nhunter2\n")
        }
        #expect(!CredentialProtocolError.missingSeparator(line: 2).message.contains("hunter2"))
    }

    @Test("refuses a non-numeric password_expiry_utc")
    func refusesBadExpiry() throws {
        #expect(throws: CredentialProtocolError.invalidExpiry(line: 1)) { try parse("password_expiry_utc=soon\n") }
    }

    @Test("splits a url attribute into its parts")
    func readsURL() throws {
        let request = try parse("url=https://bob@git.example:8080/team/repo.git\n")
        #expect(request.protocolName == "https")
        #expect(request.host == CredentialHost(server: "git.example", port: 8080))
        #expect(request.path == "team/repo.git")
        #expect(request.username == "bob")
    }
}

@Suite("credential protocol writer")
struct CredentialProtocolWriterTests {
    @Test("writes username, password, expiry and refresh token in git's format")
    func writesAllAttributes() throws {
        let credential = Credential(
            protocolName: "https", host: CredentialHost(server: "example.com"),
            username: "alice", password: Secret("pw"), passwordExpiresAt: 42,
            oauthRefreshToken: Secret("rt"))
        let text = String(decoding: try CredentialProtocol.format(credential), as: UTF8.self)
        #expect(text == "username=alice\npassword=pw\npassword_expiry_utc=42\noauth_refresh_token=rt\n")
    }

    @Test("refuses to write a value that would break the line framing", arguments: ["a\nb", "a\rb", "a\u{0}b"])
    func refusesUnwritableValue(value: String) throws {
        let credential = Credential(
            protocolName: "https", host: CredentialHost(server: "example.com"),
            username: "alice", password: Secret(value))
        #expect(throws: CredentialProtocolError.unwritableValue(key: "password")) {
            try CredentialProtocol.format(credential)
        }
    }
}

@Suite("git host attribute")
struct CredentialHostTests {
    @Test(
        "splits the port off a host",
        arguments: [
            ("example.com", "example.com", nil),
            ("example.com:8080", "example.com", 8080),
            ("[::1]:8443", "[::1]", 8443),
            ("[::1]", "[::1]", nil),
            ("example.com:http", "example.com:http", nil),
            ("example.com:99999", "example.com:99999", nil),
        ] as [(String, String, Int?)])
    func splitsPort(input: String, server: String, port: Int?) {
        let host = CredentialHost(gitHost: input)
        #expect(host.server == server)
        #expect(host.port == port)
        #expect(host.gitHost == input)
    }
}
