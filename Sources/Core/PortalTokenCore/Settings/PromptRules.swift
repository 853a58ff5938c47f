import Basics

/// Whether a run may ask a person something now: unlock the keyring, type the file store's
/// passphrase, open a browser, type a two-factor code (docs/settings.md, "Non-interactive
/// callers"). Decided only where a prompt would otherwise be shown, so a run that needs none
/// pays nothing for it.
public enum PromptPermission: Sendable, Equatable {
    /// A person is at a terminal, and nothing rules a prompt out.
    case allowed
    /// Neither stdin nor stderr is a terminal: there is nobody to ask.
    case noTerminal
    /// A setting of the caller rules every prompt out; `setting` names it as the user wrote it
    /// (`GIT_TERMINAL_PROMPT=0`, `credential.interactive=never`).
    case ruledOut(by: String)

    public var isAllowed: Bool { self == .allowed }

    /// The setting that ruled prompts out, if one did.
    public var ruledOutBy: String? {
        if case .ruledOut(let setting) = self { return setting }
        return nil
    }
}

/// How git and its callers say "never ask": `GIT_TERMINAL_PROMPT=0`, and `credential.interactive`
/// false or `never` (git 2.46+ reads it itself; scheduled `git maintenance` passes
/// `credential.interactive=false` to every git it runs, and git hands its `-c` settings to its
/// helpers in `GIT_CONFIG_PARAMETERS`). Values are read as git reads them.
public enum PromptRules {
    public static let terminalPromptVariable = "GIT_TERMINAL_PROMPT"
    public static let configParametersVariable = "GIT_CONFIG_PARAMETERS"
    public static let interactiveKey = "credential.interactive"

    /// `GIT_TERMINAL_PROMPT` when it rules prompts out (git's `git_env_bool`: a false boolean,
    /// so `0`, `false`, `no`, `off` or empty), named as it was set; nil otherwise.
    public static func terminalPromptRuling(_ environment: [String: String]) -> String? {
        guard let value = environment[terminalPromptVariable], gitBoolean(value) == false else { return nil }
        return "\(terminalPromptVariable)=\(value)"
    }

    /// Whether a `credential.interactive` value rules prompts out, as git's `credential_getpass`
    /// reads it: a false boolean, or exactly `never`. A key given without a value means true.
    public static func interactiveValueRulesOut(_ value: String?) -> Bool {
        guard let value else { return false }
        return gitBoolean(value) == false || value == "never"
    }

    /// The plain `credential.interactive` among git's command-line settings (`git -c`, passed
    /// on in `GIT_CONFIG_PARAMETERS`) when it rules prompts out: the last one given wins, as in
    /// git. Named as `credential.interactive=VALUE`.
    public static func commandLineRuling(_ environment: [String: String]) -> String? {
        guard let text = environment[configParametersVariable],
            let entries = configParameters(text)
        else { return nil }
        guard let last = entries.last(where: { $0.key.lowercased() == interactiveKey }) else { return nil }
        return interactiveValueRulesOut(last.value) ? "\(interactiveKey)=\(last.value ?? "")" : nil
    }

    /// The entries of `GIT_CONFIG_PARAMETERS`, in order: each shell-single-quoted, either
    /// `'key=value'` (git before 2.31) or `'key'='value'` (git 2.31+); a key without `=`, or
    /// with `=` and no quoted value after it, has no value. Nil when the text is not in that form.
    public static func configParameters(_ text: String) -> [(key: String, value: String?)]? {
        var entries: [(key: String, value: String?)] = []
        var rest = Substring(text)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "\n" }
            if rest.isEmpty { return entries }
            guard let (first, afterFirst) = singleQuoted(rest) else { return nil }
            rest = afterFirst
            if rest.first == "=" {
                rest = rest.dropFirst()
                if rest.first == "'" {
                    guard let (value, afterValue) = singleQuoted(rest) else { return nil }
                    entries.append((first, value))
                    rest = afterValue
                } else {
                    // `'key'=` alone: a key without a value (true).
                    entries.append((first, nil))
                }
            } else if let equals = first.firstIndex(of: "=") {
                entries.append((String(first[..<equals]), String(first[first.index(after: equals)...])))
            } else {
                entries.append((first, nil))
            }
        }
    }

    /// One `'…'` word as git's `sq_quote` writes it (a quote inside is `'\''`, a `!` may be
    /// `'\!'`), and what follows it.
    private static func singleQuoted(_ text: Substring) -> (String, Substring)? {
        guard text.first == "'" else { return nil }
        var result = ""
        var rest = text.dropFirst()
        while true {
            guard let close = rest.firstIndex(of: "'") else { return nil }
            result += rest[..<close]
            rest = rest[rest.index(after: close)...]
            // `'\''` and `'\!'`: an escaped character between two quoted stretches.
            if rest.count >= 3, rest.first == "\\", let escaped = rest.dropFirst().first,
                escaped == "'" || escaped == "!", rest.dropFirst(2).first == "'"
            {
                result.append(escaped)
                rest = rest.dropFirst(3)
                continue
            }
            return (result, rest)
        }
    }

    /// git's boolean (`git_parse_maybe_bool`): true for `true`, `yes`, `on` and a non-zero
    /// number, false for `false`, `no`, `off`, `0` and empty; nil when it is neither.
    public static func gitBoolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off", "": return false
        default: return Int(value).map { $0 != 0 }
        }
    }

    /// The URL git matches `credential.<url>.*` settings against for a request, built as git's
    /// `credential_format` builds it: `protocol://[user@]host[/path]`, percent-encoded. Nil
    /// without a host, or without a protocol that is a URL scheme (a letter, then letters,
    /// digits, `+`, `-` or `.`), so the URL never reads as an option to `git config`.
    public static func credentialURL(_ request: CredentialRequest) -> String? {
        guard let protocolName = request.protocolName, let first = protocolName.utf8.first,
            isLetter(first), protocolName.utf8.allSatisfy({ isLetter($0) || isDigit($0) || "+-.".utf8.contains($0) }),
            let host = request.host
        else { return nil }
        var url = protocolName + "://"
        if let username = request.username, !username.isEmpty {
            url += PercentCoding.encode(username, keeping: isUnreserved) + "@"
        }
        url += PercentCoding.encode(host.gitHost) { isUnreserved($0) || $0 == UInt8(ascii: ":") || isBracket($0) }
        if let path = request.path {
            url += "/" + PercentCoding.encode(path) { isUnreserved($0) || $0 == UInt8(ascii: "/") }
        }
        return url
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isBracket(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]") }
}
