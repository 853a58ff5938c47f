import PortalTokenCore

/// Hand-written argument reading: `--name value`, `--name=value`, `-X value`, and bare words.
/// Settings flags (product contract §2) are accepted before or after the command name.
struct ArgumentReader {
    private var arguments: [String]
    private(set) var settingFlags: [String: String] = [:]

    init(_ arguments: [String]) { self.arguments = arguments }

    var isEmpty: Bool { arguments.isEmpty }

    /// Flags that name a setting (from the option table); a switch among them also takes
    /// `--name=VALUE`.
    static let settingFlagNames: Set<String> = Set(OptionTable.settings.map(\.long))
    static let switchFlagNames: Set<String> = OptionTable.switchSettingNames

    /// Takes out every settings flag wherever it stands.
    mutating func extractSettingFlags() throws(CLIError) {
        var remaining: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" { remaining.append(contentsOf: arguments[(index - 1)...]); break }
            guard argument.hasPrefix("--") else { remaining.append(argument); continue }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            if Self.switchFlagNames.contains(name) && !body.contains("=") {
                settingFlags[name] = "1"
            } else if Self.settingFlagNames.contains(name) {
                if let equals = body.firstIndex(of: "=") {
                    settingFlags[name] = String(body[body.index(after: equals)...])
                } else {
                    guard index < arguments.count else { throw .usage("option '--\(name)' needs a value") }
                    settingFlags[name] = arguments[index]
                    index += 1
                }
            } else {
                remaining.append(argument)
            }
        }
        arguments = remaining
    }

    mutating func next() -> String? { arguments.isEmpty ? nil : arguments.removeFirst() }

    func peek() -> String? { arguments.first }

    /// Takes the next word as an operand. A `--` before it only ends the options (POSIX Utility
    /// Syntax Guideline 10), so that the operand may start with `-`; it is not a word itself.
    mutating func operand() -> String? {
        if arguments.first == "--" { arguments.removeFirst() }
        return next()
    }

    /// Options are read only before `--`; what follows it belongs to another program (`exec`).
    private var optionArguments: ArraySlice<String> {
        arguments[..<(arguments.firstIndex(of: "--") ?? arguments.endIndex)]
    }

    /// Takes `--name` if present.
    mutating func flag(_ name: String) -> Bool {
        guard let index = optionArguments.firstIndex(of: "--\(name)") else { return false }
        arguments.remove(at: index)
        return true
    }

    /// Takes the words after `--` (with `--` itself); without `--`, every remaining word when the
    /// first is not an option, so that `finish` can name a mistyped option instead.
    mutating func remainder() -> [String] {
        if let separator = arguments.firstIndex(of: "--") {
            let rest = Array(arguments[(separator + 1)...])
            arguments.removeSubrange(separator...)
            return rest
        }
        guard let first = arguments.first, !first.hasPrefix("-") else { return [] }
        defer { arguments = [] }
        return arguments
    }

    /// Reads `--format`, which takes only `json`: whether JSON was asked for.
    mutating func jsonFormat() throws(CLIError) -> Bool {
        let format = try option("format")
        if let format, format != "json" {
            throw .usage("--format takes only json, not '\(format.prefix(32))'")
        }
        return format == "json"
    }

    /// Takes `--name VALUE`, `--name=VALUE`, or the short form `-x VALUE`.
    mutating func option(_ name: String, short: String? = nil) throws(CLIError) -> String? {
        for (index, argument) in optionArguments.enumerated() {
            if argument.hasPrefix("--\(name)=") {
                arguments.remove(at: index)
                return String(argument.dropFirst(name.count + 3))
            }
            if argument == "--\(name)" || (short != nil && argument == "-\(short!)") {
                guard index + 1 < optionArguments.count else { throw .usage("option '\(argument)' needs a value") }
                let value = arguments[index + 1]
                arguments.removeSubrange(index...(index + 1))
                return value
            }
        }
        return nil
    }

    /// Fails on anything left over. An unknown option is named, with the nearest known one when
    /// it is close (as git does); a stray word is named only when it cannot be private (a plain
    /// word, no digits, no `@`): a token or an address typed in the wrong place is never echoed.
    /// With `optionsOnly`, only an unknown option is reported (the command's own error explains
    /// a stray word better).
    func finish(command: String, options: [String], optionsOnly: Bool = false) throws(CLIError) {
        let leftover = optionArguments.filter { $0.hasPrefix("-") && $0 != "-" }.map {
            String($0.prefix { $0 != "=" }.prefix(64))
        }
        if let unknown = leftover.first(where: { !options.contains($0) }) {
            throw .usage(
                "unknown option '\(unknown)' for '\(command)'",
                hint: Suggestion.hint(for: unknown, among: options + ["--help"], command: command))
        }
        // A known option still here was not taken: its value is missing (the command's own error
        // says so), or it is repeated or does not go with the others.
        guard !optionsOnly else { return }
        if let known = leftover.first {
            throw .usage(
                "option '\(known)' is repeated or does not go with the other options of '\(command)'",
                hint: "see 'portal-token \(command) --help'")
        }
        guard let first = arguments.first else { return }
        if first == "--" {
            throw .usage("'\(command)' takes nothing after '--'", hint: "see 'portal-token \(command) --help'")
        }
        if Suggestion.isShowable(first) {
            throw .usage(
                "unexpected argument '\(first)' for '\(command)'", hint: "see 'portal-token \(command) --help'")
        }
        throw .usage("'\(command)' takes no further arguments", hint: "see 'portal-token \(command) --help'")
    }
}

/// git's "did you mean": the closest known name by edit distance (transpositions count as one),
/// offered only when it is close.
enum Suggestion {
    static func nearest(to word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased())
        var best: (name: String, distance: Int)?
        for candidate in Set(candidates).sorted() {
            let distance = editDistance(target, Array(candidate.lowercased()))
            if distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        guard let best else { return nil }
        let stem = target.drop { $0 == "-" }.count
        let allowed = stem <= 3 ? 1 : stem <= 6 ? 2 : 3
        if best.distance <= allowed { return best.name }
        // A prefix of exactly one name (`stat` for `status`) is also what the user meant.
        guard stem >= 2 else { return nil }
        let prefixed = Set(candidates.filter { $0.lowercased().hasPrefix(word.lowercased()) })
        return prefixed.count == 1 ? prefixed.first : nil
    }

    /// The hint line for an unknown name: "did you mean …?" when one is close, else the help.
    static func hint(for word: String, among candidates: [String], command: String?) -> String {
        if let match = nearest(to: word, among: candidates) { return "did you mean '\(match)'?" }
        return command.map { "see 'portal-token \($0) --help'" } ?? "see 'portal-token --help'"
    }

    /// Whether a stray word may be echoed: a short plain word that cannot be a token, a code or
    /// an email address.
    static func isShowable(_ word: String) -> Bool {
        word.count <= 32 && !word.isEmpty
            && word.allSatisfy { ($0.isLetter && $0.isASCII) || $0 == "-" || $0 == "_" || $0 == "." }
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
    /// transpositions each cost one.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
