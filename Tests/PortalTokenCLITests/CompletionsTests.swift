import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The shells complete with the completion files in contrib/completions/, and man and groff
/// accept the man page. Their lists of commands and options are generated from the option table
/// (contrib/dev/generate.sh), and `contrib/test.sh` fails when a committed one is stale.
@Suite("shell completions and man page")
struct CompletionsTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let bashFile = root.appendingPathComponent("contrib/completions/portal-token.bash").path
    static let zshFile = root.appendingPathComponent("contrib/completions/_portal-token").path
    static let fishFile = root.appendingPathComponent("contrib/completions/portal-token.fish").path
    static let manPage = root.appendingPathComponent("contrib/man/portal-token.1").path

    /// The commands and per-command options of docs/commands.md.
    static let contractOptions: [String: [String]] = [
        "get": ["--format"], "store": [], "erase": [],
        "login": ["--email", "--google", "--apple", "--no-browser", "--timeout", "--with-token", "--end-user"],
        "token": ["--format"], "exec": ["--token-var"], "exec-credential": [],
        "list": ["--format"], "setup-git": ["--unset"], "doctor": ["--format", "--network"],
        "redirect": [], "verify-totp": [], "methods": ["--format"], "status": ["--format"],
        "refresh": [], "api": ["-X", "--data"], "logout": [],
    ]

    /// The settings flags (docs/settings.md, "Flags"), and the options every invocation takes.
    static let globalOptions = Setting.all.compactMap(\.flag).map { "--" + $0 } + ["--config", "--help", "--version"]

    /// Every command name under "Commands:" in `portal-token --help`, with those docs/commands.md lists.
    static func commands() throws -> [String] {
        let help = try ProcessRunner.portalToken(["--help"])
        #expect(help.exitCode == 0)
        var names: [String] = []
        var inList = false
        for line in help.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "Commands:" {
                inList = true
            } else if inList {
                guard line.hasPrefix("  "), let name = line.split(separator: " ").first else { break }
                names.append(String(name))
            }
        }
        #expect(names.count >= 3, "no command list found in 'portal-token --help'")
        return names + contractOptions.keys.sorted().filter { !names.contains($0) }
    }

    /// The options of `COMMAND`: those docs/commands.md lists, and those of the usage line of `COMMAND --help`
    /// when this build has the command.
    static func options(of command: String) throws -> [String] {
        var options = contractOptions[command] ?? []
        let help = try ProcessRunner.portalToken([command, "--help"])
        if help.exitCode == 0, let usage = help.stdout.split(separator: "\n").first {
            for word in usage.split(whereSeparator: { " []|<>".contains($0) }) where word.hasPrefix("-") && word != "--"
            {
                if !options.contains(String(word)) { options.append(String(word)) }
            }
        }
        return options
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    /// Whether `word` stands in `text` on its own: not inside a longer option or name.
    static func contains(_ text: String, word: String) -> Bool {
        let isNamePart: (Character?) -> Bool = { character in
            guard let character else { return false }
            return character.isLetter || character.isNumber || character == "-" || character == "_"
        }
        var searchStart = text.startIndex
        while let range = text.range(of: word, range: searchStart..<text.endIndex) {
            let before = range.lowerBound > text.startIndex ? text[text.index(before: range.lowerBound)] : nil
            let after = range.upperBound < text.endIndex ? text[range.upperBound] : nil
            if !isNamePart(before) && !isNamePart(after) { return true }
            searchStart = text.index(after: range.lowerBound)
        }
        return false
    }

    /// The absolute path of a program on PATH, or nil when it is not installed.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin", "/bin"] {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs `body` with an environment whose HOME and XDG directories are a fresh folder that
    /// is removed afterwards, so that a shell's own state files never land in the user's home.
    static func withScratchHome<Result>(_ body: ([String: String]) throws -> Result) throws -> Result {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-completion-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(
            ProcessRunner.environment([
                "HOME": directory.path, "XDG_CONFIG_HOME": directory.path + "/config",
                "XDG_DATA_HOME": directory.path + "/data", "XDG_CACHE_HOME": directory.path + "/cache",
            ]))
    }

    @Test("bash accepts the bash completion")
    func bashSyntax() throws {
        let bash = try #require(Self.executable("bash"), "bash is not installed")
        let result = try ProcessRunner.run(bash, ["-n", Self.bashFile])
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
    }

    @Test("zsh accepts the zsh completion")
    func zshSyntax() throws {
        let result = try ProcessRunner.run(try #require(Self.executable("zsh")), ["-f", "-n", Self.zshFile])
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
    }

    @Test("fish accepts the fish completion")
    func fishSyntax() throws {
        let fish = try #require(Self.executable("fish"))
        let result = try Self.withScratchHome {
            try ProcessRunner.run(fish, ["--no-execute", Self.fishFile], environment: $0)
        }
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
    }

    /// What bash's completion offers for a command line whose last word is being completed,
    /// run in `directory`.
    static func bashCompletions(_ words: [String], in directory: String = "/") throws -> [String] {
        let bash = try #require(executable("bash"), "bash is not installed")
        let script = """
            . "$1" || exit 97
            cd "$2" || exit 98
            shift 2
            COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
            _portal_token
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try ProcessRunner.run(
            bash, ["--norc", "--noprofile", "-c", script, "bash", bashFile, directory] + words)
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test("bash completes command names, and after one its options")
    func bashCommandsAndOptions() throws {
        let cases: [([String], [String])] = [
            (["portal-token", ""], try Self.commands()),
            (["portal-token", "--backend", "file", "ver"], ["verify-totp"]),
            (["portal-token", "--"], Self.globalOptions),
            (["portal-token", "login", "--"], try Self.options(of: "login")),
            (["portal-token", "api", "--"], ["--data", "--method"]),
        ]
        for (words, expected) in cases {
            let offered = try Self.bashCompletions(words)
            for candidate in expected {
                #expect(offered.contains(candidate), "bash offers \(offered) for \(words), not \(candidate)")
            }
        }
    }

    @Test("bash offers neither an option already given, nor its other spelling, nor one it excludes")
    func bashExclusions() throws {
        let login = try Self.bashCompletions(["portal-token", "login", "--google", "--"])
        #expect(login.contains("--no-browser") && login.contains("--timeout"), "\(login)")
        for excluded in ["--google", "--email", "--apple", "--with-token"] {
            #expect(!login.contains(excluded), "bash offers \(excluded) after login --google")
        }
        let api = try Self.bashCompletions(["portal-token", "api", "-X", "GET", "--"])
        #expect(api.contains("--data") && !api.contains("--method"), "\(api)")
    }

    @Test(
        "bash completes the values of --backend, --account-abstracted, --format and -X",
        arguments: [
            (["portal-token", "--backend", ""], ["auto", "secret-service", "file", "vault"]),
            (["portal-token", "--backend", "=", "s"], ["secret-service"]),
            (["portal-token", "get", "--account-abstracted", ""], ["true", "false"]),
            (["portal-token", "status", "--format", ""], ["json"]),
            (["portal-token", "methods", "--format=j"], ["--format=json"]),
            (["portal-token", "api", "-X", ""], ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        ])
    func bashValues(words: [String], expected: [String]) throws {
        #expect(try Self.bashCompletions(words) == expected)
    }

    @Test("bash completes files for --config and --data @FILE")
    func bashFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-completion-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(
            FileManager.default.createFile(
                atPath: directory.appendingPathComponent("body.json").path, contents: Data("{}".utf8)))
        #expect(
            FileManager.default.createFile(atPath: directory.appendingPathComponent("config").path, contents: Data()))
        #expect(try Self.bashCompletions(["portal-token", "--config", "co"], in: directory.path) == ["config"])
        #expect(
            try Self.bashCompletions(["portal-token", "api", "/api/v3/clients/me", "--data", "@b"], in: directory.path)
                == ["@body.json"])
        #expect(try Self.bashCompletions(["portal-token", "api", "-d", "@-"], in: directory.path) == ["@-"])
    }

    @Test("fish completes the values of --backend and -X, and files for --data @FILE")
    func fishValues() throws {
        let fish = try #require(Self.executable("fish"))
        func offered(_ line: String) throws -> [String] {
            let result = try Self.withScratchHome {
                try ProcessRunner.run(
                    fish, ["--no-config", "-c", "source $argv[1]; complete -C $argv[2]", Self.fishFile, line],
                    environment: $0)
            }
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
            return result.stdout.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
        }
        #expect(try Set(offered("portal-token ")).isSuperset(of: Self.commands()))
        #expect(try offered("portal-token --backend ").sorted() == ["auto", "file", "secret-service", "vault"])
        #expect(try offered("portal-token api -X P").sorted() == ["PATCH", "POST", "PUT"])
        #expect(
            try offered("portal-token api --data @\(Self.root.path)/Package.s") == ["@\(Self.root.path)/Package.swift"])
    }

    // MARK: - Man page

    /// The man page's source with roff's hyphen, break and font escapes resolved, by section.
    static func manSections() throws -> [String: [String]] {
        let text = try read(manPage)
            .replacing(#/\\f[BIR]/#, with: "")
            .replacingOccurrences(of: "\\-", with: "-")
            .replacingOccurrences(of: "\\%", with: "")
            .replacingOccurrences(of: "\\:", with: "")
        var sections: [String: [String]] = [:]
        var current = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                current = String(line.dropFirst(4)).replacingOccurrences(of: "\"", with: "")
                sections[current] = []
            } else {
                sections[current, default: []].append(line)
            }
        }
        return sections
    }

    /// The tags of a `.TP` list (the line after each `.TP`), without their font macro.
    static func tags(_ lines: [String]) -> [String] {
        zip(lines, lines.dropFirst()).compactMap { line, next in
            guard line == ".TP" else { return nil }
            return next.hasPrefix(".") ? String(next.drop { $0 != " " }.dropFirst()) : next
        }
    }

    /// The first word of each tag of a `.TP` list.
    static func tagNames(_ lines: [String]) -> [String] {
        tags(lines).compactMap { $0.split(separator: " ").first.map(String.init) }
    }

    @Test("the man page has the sections a user looks for")
    func manSectionsPresent() throws {
        let sections = try Self.manSections()
        for name in [
            "NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "SETTINGS", "EXIT STATUS", "FILES",
            "ENVIRONMENT", "SECURITY", "EXAMPLES", "SEE ALSO",
        ] {
            #expect(sections[name] != nil, "the man page has no \(name) section")
        }
        let seeAlso = sections["SEE ALSO", default: []].joined(separator: "\n")
        for page in ["gitcredentials (7)", "git-credential (1)", "secret-tool (1)"] {
            #expect(seeAlso.contains(page), "SEE ALSO does not name \(page)")
        }
    }

    @Test("the man page describes every command and names every option")
    func manCommandsAndOptions() throws {
        let sections = try Self.manSections()
        let described = Self.tagNames(sections["COMMANDS", default: []])
        let synopsis = sections["SYNOPSIS", default: []].joined(separator: "\n")
        let page = sections.values.joined().joined(separator: "\n")
        for command in try Self.commands() {
            #expect(described.contains(command), "COMMANDS does not describe '\(command)'")
            #expect(Self.contains(synopsis, word: command), "SYNOPSIS does not show '\(command)'")
            for option in try Self.options(of: command) {
                #expect(Self.contains(page, word: option), "the man page does not name \(option) of '\(command)'")
            }
        }
    }

    @Test("the man page gives every setting's environment variable and config key, and every exit code")
    func manSettingsAndExitCodes() throws {
        let sections = try Self.manSections()
        let settings = sections["SETTINGS", default: []].joined(separator: "\n")
        let environment = Self.tags(sections["ENVIRONMENT", default: []])
        let variables = Setting.all.compactMap(\.environment) + ["PORTAL_TOKEN_PASSPHRASE", "PORTAL_TOKEN_CONFIG"]
        for key in Setting.all.map(\.key) {
            #expect(Self.contains(settings, word: key), "SETTINGS does not give the config key \(key)")
        }
        for variable in variables {
            #expect(Self.contains(settings, word: variable), "SETTINGS does not give \(variable)")
            #expect(
                environment.contains { Self.contains($0, word: variable) }, "ENVIRONMENT does not describe \(variable)")
        }
        // The codes 0 to 7 (docs/exit-codes.md), 70 for an internal error (EX_SOFTWARE), exec's 126 and 127 (as
        // env(1)), and 130 for a sign-in stopped by Ctrl-C, as a shell reports SIGINT.
        #expect(
            Self.tagNames(sections["EXIT STATUS", default: []])
                == (0...7).map(String.init) + ["70", "126", "127", "130"])
    }

    @Test("man accepts the man page without a warning")
    func manWarnings() throws {
        let man = try #require(Self.executable("man"))
        let environment = ProcessRunner.environment([
            "MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8",
        ])
        let result = try ProcessRunner.run(man, ["--warnings", "-l", Self.manPage], environment: environment)
        #expect(result.exitCode == 0)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        #expect(result.stdout.contains("portal-token"))
    }

    @Test("groff accepts the man page without a warning")
    func groffWarnings() throws {
        let groff = try #require(Self.executable("groff"))
        let environment = ProcessRunner.environment(["LC_ALL": "C.UTF-8"])
        // -t: the SETTINGS table is tbl input, as the page's first line declares.
        let result = try ProcessRunner.run(groff, ["-t", "-man", "-z", "-ww", Self.manPage], environment: environment)
        #expect(result.exitCode == 0)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
    }
}
