import Foundation
@testable import Commands
@testable import Operations
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The command line as it is read: unknown commands and options, malformed input and
/// configuration, each a usage error (exit 2) that names what was wrong.
@Suite("command line")
struct CommandLineTests {
    @Test("an unknown command or option is a usage error (exit 2)")
    func unknownCommand() throws {
        let cli = try InProcessCLI()
        let command = cli.run(["frobnicate"])
        #expect(command.exitCode == 2)
        #expect(
            command.stderr
                == "portal-token: error: 'frobnicate' is not a portal-token command\nhint: see 'portal-token --help'\n")
        let option = cli.run(["get", "--colour"])
        #expect(option.exitCode == 2)
        #expect(option.stderr.contains("unknown option '--colour'"))
    }

    @Test("under the git helper name an unknown operation is ignored with exit 0")
    func unknownOperationAsGitHelper() throws {
        let result = try InProcessCLI().run(["frobnicate"], stdin: "protocol=https\nhost=x.tld\n", isGitHelper: true)
        #expect(result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty)
    }

    @Test("no command is a usage error after the overview on stderr")
    func noCommand() throws {
        let result = try InProcessCLI().run([])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("usage: portal-token"))
        #expect(result.stderr.hasSuffix("portal-token: error: no command given\nhint: see 'portal-token --help'\n"))
    }

    @Test(
        "a malformed protocol line is refused without echoing it",
        arguments: [
            "protocol=https\nhost=x.tld\nhunter2-secret\n",
            "protocol=https\nhost=x.tld\npassword=hunter2\r-secret\r\n",
        ])
    func malformedInput(input: String) throws {
        let cli = try InProcessCLI()
        for operation in ["get", "store", "erase"] {
            let result = cli.run([operation], stdin: input)
            #expect(result.exitCode == 2)
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.hasPrefix("portal-token: error: line 3 of the credential input"))
            #expect(!result.stderr.contains("hunter2"))
        }
        #expect(try cli.credentials.lookup(CredentialQuery()).isEmpty)
    }

    @Test("a config file with an unknown key is a configuration error naming the line")
    func badConfigFile() throws {
        let cli = try InProcessCLI()
        let config = cli.directory + "/config-file"
        try "backend = auto\ncolour = blue\n".write(toFile: config, atomically: true, encoding: .utf8)
        let result = cli.run(["--config", config, "get"], stdin: "protocol=https\nhost=x.tld\n")
        #expect(result.exitCode == 2)
        #expect(result.stderr.contains("\(config):2: unknown setting 'colour'"))
    }

    @Test("a bad api host stops a request for Portal but not one for another host")
    func badAPIHost() throws {
        let cli = try InProcessCLI()
        try cli.credentials.store(
            Credential(
                protocolName: "https", host: CredentialHost(gitHost: "github.com"),
                username: "alice", password: Secret("secret-1")))
        let bad = ["PORTAL_API_HOST": "https://api.mine.example/ bad"]
        let github = cli.run(["get"], stdin: "protocol=https\nhost=github.com\n\n", environment: bad)
        #expect(github.exitCode == 0 && github.stdout == "username=alice\npassword=secret-1\n")
        let portal = cli.run(["get"], stdin: "protocol=https\nhost=api.portalhq.io\n\n", environment: bad)
        #expect(portal.exitCode == 2)
        #expect(portal.stderr.hasPrefix("portal-token: error: PORTAL_API_HOST: "))
    }
}

/// A setting is checked where it is used: a git request for another host never fails on one
/// only the Portal session reads, and the Portal path refuses a wrong value before it does anything.
@Suite("settings checked where they are used")
struct SettingsWhereUsedTests {
    static let portalOnly: [(name: String, value: String, message: String)] = [
        ("PORTAL_ACCOUNT_ABSTRACTED", "maybe", "PORTAL_ACCOUNT_ABSTRACTED must be true or false"),
        ("PORTAL_TOKEN_ON_SESSION_INVALIDATED", "hooks/end.sh", "PORTAL_TOKEN_ON_SESSION_INVALIDATED: the hook path"),
    ]

    @Test("a Portal-only setting with a wrong value does not stop get, store or erase for another host")
    func otherHostUnaffected() throws {
        for setting in Self.portalOnly {
            let cli = try InProcessCLI()
            let bad = [setting.name: setting.value]
            let stored = cli.run(
                ["store"], stdin: "protocol=https\nhost=github.com\nusername=alice\npassword=secret-1\n\n",
                environment: bad)
            #expect(stored.exitCode == 0, "\(setting.name): \(stored.stderr)")
            let got = cli.run(["get"], stdin: "protocol=https\nhost=github.com\n\n", environment: bad)
            #expect(got.exitCode == 0 && got.stdout == "username=alice\npassword=secret-1\n", "\(got.stderr)")
            let erased = cli.run(["erase"], stdin: "protocol=https\nhost=github.com\n\n", environment: bad)
            #expect(erased.exitCode == 0, "\(setting.name): \(erased.stderr)")
        }
    }

    @Test("the Portal path refuses a wrong Portal-only setting (exit 2) before anything is sent")
    func portalPathRefuses() throws {
        for setting in Self.portalOnly {
            let cli = try InProcessCLI()
            try cli.signIn()
            let bad = [setting.name: setting.value]
            for (arguments, stdin) in [
                (["token"], ""), (["get"], "protocol=https\nhost=api.portalhq.io\n\n"), (["refresh"], ""),
                (["login", "--google"], ""),
            ] {
                let result = cli.run(arguments, stdin: stdin, environment: bad)
                #expect(result.exitCode == 2 && result.stdout.isEmpty, "\(arguments): \(result.stderr)")
                #expect(result.stderr.hasPrefix("portal-token: error: \(setting.message)"), "\(result.stderr)")
            }
            #expect(cli.transport.requests.isEmpty)
        }
        let hook = try InProcessCLI().run(["token"], environment: ["PORTAL_TOKEN_ON_SESSION_INVALIDATED": "x.sh"])
        #expect(hook.stderr.contains("\nhint: give the hook's full path"))
        let abstracted = try InProcessCLI().run(["token"], environment: ["PORTAL_ACCOUNT_ABSTRACTED": "maybe"])
        #expect(abstracted.stderr.contains("\nhint: set it to true or false"), "\(abstracted.stderr)")
    }
}

/// Usage errors name what was wrong and suggest what was meant, as git does.
@Suite("usage errors")
struct UsageErrorTests {
    /// Runs portal-token with no settings from the environment.
    static func run(_ arguments: [String], stdin: String = "") throws -> CommandResult {
        try InProcessCLI().run(arguments, stdin: stdin, unsetting: ["PORTAL_AUTH_ENVIRONMENT_ID"])
    }

    @Test(
        "a mistyped command gets did you mean",
        arguments: [("stauts", "status"), ("lgoin", "login"), ("tokn", "token")])
    func mistypedCommand(typed: String, meant: String) throws {
        let result = try Self.run([typed])
        #expect(result.exitCode == 2)
        #expect(
            result.stderr
                == "portal-token: error: '\(typed)' is not a portal-token command\nhint: did you mean '\(meant)'?\n")
    }

    @Test("login names the unknown option instead of asking how to sign in")
    func loginUnknownOption() throws {
        let typo = try Self.run(["login", "--emial", "a@b.c"])
        #expect(typo.exitCode == 2)
        #expect(
            typo.stderr == "portal-token: error: unknown option '--emial' for 'login'\nhint: did you mean '--email'?\n")
        let unknown = try Self.run(["login", "--foo"])
        #expect(unknown.exitCode == 2)
        #expect(unknown.stderr.hasPrefix("portal-token: error: unknown option '--foo' for 'login'\n"))
    }

    @Test("a stray address after login gets login's own advice and is never echoed")
    func loginStrayAddress() throws {
        let result = try Self.run(["login", "someone@example.com"])
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: choose how to sign in"))
        #expect(!result.stderr.contains("someone@example.com"))
    }

    @Test("an unknown option before the command is named as an option")
    func unknownGlobalOption() throws {
        let result = try Self.run(["--bogus", "status"])
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: unknown option '--bogus'\n"))
        let typo = try Self.run(["--bakend", "file", "status"])
        #expect(typo.stderr.contains("hint: did you mean '--backend'?"))
    }

    @Test(
        "a known option without its value says that it needs a value, never that it is unknown",
        arguments: [
            (["login", "--email"], "--email"), (["token", "--format"], "--format"),
            (["exec", "--token-var"], "--token-var"), (["api", "-X"], "-X"),
        ])
    func optionWithoutValue(arguments: [String], option: String) throws {
        let result = try Self.run(arguments)
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: option '\(option)' needs a value\n"), "\(result.stderr)")
    }

    @Test("a repeated option is named as repeated, never as unknown with itself as the suggestion")
    func repeatedOption() throws {
        let result = try Self.run(["token", "--format", "json", "--format", "json"])
        #expect(result.exitCode == 2)
        #expect(
            result.stderr == "portal-token: error: option '--format' is given more than once\n"
                + "hint: see 'portal-token token --help'\n",
            "\(result.stderr)")
        #expect(!result.stderr.contains("did you mean"))
    }

    @Test("a stray word is named, but a word that could be private is not echoed")
    func strayWord() throws {
        let plain = try Self.run(["status", "extra"])
        #expect(plain.exitCode == 2 && plain.stderr.contains("unexpected argument 'extra' for 'status'"))
        let secret = try Self.run(["status", "s3cr3t-t0ken-value"])
        #expect(secret.exitCode == 2 && !secret.stderr.contains("s3cr3t"))
    }

    @Test("a bad --backend value is reported before a missing environment ID")
    func badValueBeforeMissingSetting() throws {
        let result = try Self.run(["--backend", "bogus", "token"])
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: --backend must be auto, secret-service, file or vault"))
        #expect(!result.stderr.contains("did you mean"))
    }

    @Test("a store called by its common name or misspelt gets a did-you-mean, in migrate and --backend")
    func backendDidYouMean() throws {
        for (words, meant) in [
            (["migrate", "--to", "keyring"], "secret-service"), (["migrate", "--to", "fiel"], "file"),
            (["migrate", "--to", "file", "--from", "gnome-keyring"], "secret-service"),
            (["migrate", "--to", "openbao"], "vault"), (["--backend", "kwallet", "list"], "secret-service"),
            (["--backend", "secret-servce", "list"], "secret-service"),
        ] {
            let result = try Self.run(words)
            #expect(result.exitCode == 2, "\(words)")
            #expect(result.stderr.hasSuffix("hint: did you mean '\(meant)'?\n"), "\(words): \(result.stderr)")
        }
    }

    @Test("a missing environment ID is a usage error with the ways to set it")
    func missingEnvironmentID() throws {
        let result = try Self.run(["token"])
        #expect(result.exitCode == 2 && result.stdout.isEmpty)
        #expect(
            result.stderr
                == """
                portal-token: error: no auth environment ID is set, and no account is signed in on this machine\n\
                hint: sign in with 'portal-token login --env ID …', or set PORTAL_AUTH_ENVIRONMENT_ID, pass --env ID, \
                or add auth-environment-id to the config file\n
                """
        )
    }

    @Test("--help lists the global options and exit codes, and points to the man page")
    func topLevelHelp() throws {
        let help = try Self.run(["--help"])
        #expect(help.exitCode == 0)
        for text in ["--env", "--api-host", "--backend", "--config", "--verbose", "Exit codes:", "man portal-token"] {
            #expect(help.stdout.contains(text), "--help does not mention \(text)")
        }
    }

    @Test("a known option where a value belongs is refused, naming both, and nothing is sent")
    func optionInValuePosition() throws {
        let cli = try InProcessCLI()
        let result = cli.run(["login", "--email", "--google"])
        #expect(result.exitCode == 2)
        #expect(
            result.stderr
                == "portal-token: error: option '--email' needs a value, but '--google' is an option\n"
                + "hint: give the value, or write --email=VALUE for a value that starts with '-'\n")
        for arguments in [
            ["api", "-X", "-H", "A: b", "/api/v3/clients/me"], ["--env", "--verbose", "status"],
            ["status", "--api-host", "--format", "json"], ["login", "--timeout", "--no-browser", "--google"],
        ] {
            let refused = cli.run(arguments)
            #expect(refused.exitCode == 2, "\(arguments)")
            #expect(refused.stderr.contains("needs a value, but '"), "\(arguments): \(refused.stderr)")
        }
        // The = form takes any value, an option's name included.
        let inline = cli.run(["--env=--verbose", "token"])
        #expect(inline.exitCode == 1 && inline.stderr.contains("environment '--verbose'"), "\(inline.stderr)")
        #expect(cli.transport.requests.isEmpty)
    }

    @Test(
        "options the table says exclude each other are refused, naming both",
        arguments: [
            (["login", "--email", "a@b.c", "--google"], "--email", "--google"),
            (["login", "--apple", "--google"], "--google", "--apple"),
            (["login", "--with-token", "--apple"], "--apple", "--with-token"),
        ])
    func excludedOptions(arguments: [String], first: String, second: String) throws {
        let cli = try InProcessCLI()
        let result = cli.run(arguments)
        #expect(result.exitCode == 2)
        #expect(
            result.stderr
                == "portal-token: error: options '\(first)' and '\(second)' cannot be used together\n"
                + "hint: see 'portal-token login --help'\n")
        #expect(cli.transport.requests.isEmpty)
    }

    @Test("an option given twice is refused unless it may repeat; a flag takes no value")
    func repeatedAndValuedFlags() throws {
        let cli = try InProcessCLI()
        for arguments in [["login", "--google", "--google"], ["api", "-X", "GET", "--method", "GET", "/x"]] {
            let result = cli.run(arguments)
            #expect(result.exitCode == 2 && result.stderr.contains("is given more than once"), "\(result.stderr)")
        }
        let valued = cli.run(["login", "--google=yes"])
        #expect(
            valued.exitCode == 2 && valued.stderr.hasPrefix("portal-token: error: option '--google' takes no value"))
        // -H may repeat: both headers reach the request.
        try cli.signIn(token: "token-h")
        let headers = cli.run(["api", "-H", "X-One: 1", "--header=X-Two: 2", "/api/v3/clients/me"])
        #expect(headers.exitCode == 0, "\(headers.stderr)")
        let sent = cli.transport.requests.first?.headers ?? []
        #expect(sent.contains { $0.name == "X-One" } && sent.contains { $0.name == "X-Two" })
    }

    @Test("after --, an operand may start with a dash")
    func operandAfterDoubleDash() throws {
        let cli = try InProcessCLI()
        let result = cli.run(["verify-totp", "--", "-12345"])
        // The operand is the code, refused as not six digits, not as an unknown option.
        #expect(!result.stderr.contains("unknown option"), "\(result.stderr)")
        let unknown = cli.run(["verify-totp", "-12345"])
        #expect(unknown.exitCode == 2 && unknown.stderr.hasPrefix("portal-token: error: unknown option '-12345'"))
    }

    @Test("a settings flag after exec's name is refused: what follows the program is the program's")
    func execSettingsAfterCommandName() throws {
        let cli = try InProcessCLI()
        let result = cli.run(["exec", "--env", "x", "--", "true"])
        #expect(result.exitCode == 2)
        #expect(result.stderr.hasPrefix("portal-token: error: option '--env' goes before 'exec', not after it\n"))
        // Before the program, only exec's own options; the program's own arguments are not read.
        let help = cli.run(["exec", "--help"])
        #expect(help.exitCode == 0 && help.stdout.hasPrefix("usage: portal-token exec"))
        let signedOut = cli.run(["exec", "/bin/echo", "--bogus", "--env", "x", "--help"])
        #expect(signedOut.exitCode == 1 && signedOut.stdout.isEmpty, "\(signedOut.stderr)")
    }

    @Test("login --with-token reads the token from stdin only: an argument or an empty stdin is a usage error")
    func tokenFromStdinOnly() throws {
        let cli = try InProcessCLI()
        let empty = cli.run(["login", "--with-token"], stdin: "")
        #expect(empty.exitCode == 2 && empty.stderr.contains("no token on stdin"))
        let argument = cli.run(["login", "--with-token", "t0ken-in-argv-123"], stdin: "")
        #expect(argument.exitCode == 2 && !argument.stderr.contains("t0ken-in-argv-123"))
        #expect(cli.transport.requests.isEmpty)
    }
}

/// `api`'s arguments: paths that could split a request line and headers portal-token owns are
/// refused before anything is sent.
@Suite("api arguments")
struct APIArgumentTests {
    static func signedIn() throws -> InProcessCLI {
        let cli = try InProcessCLI()
        try cli.signIn(token: "token-api")
        return cli
    }

    @Test("a path with a space or a control character is a usage error (exit 2), and nothing is sent")
    func pathsWithSpaces() throws {
        let cli = try Self.signedIn()
        for path in [
            "/api/v3/clients/me HTTP/1.0", "/api/v3/clients/me\r\nX-Injected: 1", "/api/v3/\u{1b}[31m", "/api/v3/\tx",
            "/api/v3/\u{7f}",
        ] {
            let result = cli.run(["api", path])
            #expect(result.exitCode == 2, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("portal-token: error: the API path holds a space or a control character"))
            #expect(result.stderr.contains("hint: percent-encode it"))
        }
        #expect(cli.transport.requests.isEmpty)
    }

    @Test("'--' before PATH ends the options; '--' alone is no path")
    func doubleDash() throws {
        let cli = try Self.signedIn()
        let missing = cli.run(["api", "--"])
        #expect(missing.exitCode == 2)
        #expect(missing.stderr.hasPrefix("portal-token: error: 'api' needs a PATH"))
        let result = cli.run(["api", "-X", "GET", "--", "/api/v3/clients/me"])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(cli.transport.requests.map(\.url) == ["https://api.portalhq.io/api/v3/clients/me"])
    }

    @Test(
        "-H refuses Authorization, Host and malformed headers before anything is sent",
        arguments: [
            "Authorization: Bearer other", "host: evil.example", "HOST:x", "Content-Length: 5", "accept: text/html",
            "X-Portal-Trace-Id: 1", "no colon here", ": empty name",
            "Bad Name: x", "X-Split: a\r\nX-Injected: 1",
        ])
    func refusedHeaders(header: String) throws {
        let cli = try Self.signedIn()
        let result = cli.run(["api", "-H", header, "/api/v3/clients/me"])
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("portal-token: error: -H"))
        #expect(!result.stderr.contains("Bearer other") && !result.stderr.contains("evil.example"))
        #expect(cli.transport.requests.isEmpty)
    }
}
