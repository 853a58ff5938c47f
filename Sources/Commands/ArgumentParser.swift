import Operations
import PortalTokenCore

/// The command line as read against the option table: the options of one command by their
/// declaration, its operands, and the settings flags. Accepted forms: `--name value`,
/// `--name=value`, `-x value`, bare operands, and `--` before operands that start with `-`.
struct ParsedArguments {
    /// The command whose options these are; nil before the command name.
    let command: CommandSpec?
    /// Each option given, by long name: its values in order (a flag holds one empty value).
    private var values: [String: [String]] = [:]
    /// The words that are not options, in order.
    private(set) var operands: [String] = []
    /// Whether `--help` or `-h` stood where an option may.
    private(set) var wantsHelp = false

    init(command: CommandSpec?) { self.command = command }

    /// The value of an option that takes one; nil when it was not given.
    func value(_ option: OptionSpec) -> String? { values(option).last }

    /// Every value of a repeatable option, in order.
    func values(_ option: OptionSpec) -> [String] {
        assert(command?.options.contains { $0.long == option.long } ?? true, "'\(option.long)' is not declared")
        return values[option.long] ?? []
    }

    /// Whether a flag was given.
    func has(_ option: OptionSpec) -> Bool { !values(option).isEmpty }

    /// Reads `--format`, which takes only `json`: whether JSON was asked for.
    func jsonFormat() throws(CLIError) -> Bool {
        let format = value(.format)
        if let format, format != "json" {
            throw .usage("--format takes only json, not '\(format.prefix(32))'")
        }
        return format == "json"
    }

    /// The settings flags given (docs/settings.md, "Flags"), by flag name, as `Settings` reads them.
    var settingFlags: [String: String] {
        var flags: [String: String] = [:]
        for setting in Setting.flagged {
            if let name = setting.flag, let value = values[name]?.last { flags[name] = value }
        }
        return flags
    }

    /// Reads the words before the command name (settings flags, `--help`, `--version`) and
    /// returns the command name and the words after it; nil when there is no command name.
    mutating func readGlobal(_ words: ArraySlice<String>) throws(CLIError) -> (String, ArraySlice<String>)? {
        let rest = try read(words, options: OptionTable.globalOptions, endsAtOperand: true)
        guard let word = rest.first else { return nil }
        return (word, rest.dropFirst())
    }

    /// Reads the words after the command name against the command's options and the settings
    /// flags. For a command that runs another program the settings flags stand before the command
    /// name, and the first operand, the program, ends the options: the rest is the program's.
    mutating func readCommand(_ words: ArraySlice<String>) throws(CLIError) {
        guard let command else { return }
        let options = command.options + [.help] + (command.runsProgram ? [] : OptionTable.settings)
        let rest = try read(words, options: options, endsAtOperand: command.runsProgram)
        operands += rest
        guard !wantsHelp else { return }
        for option in command.options where !values(option).isEmpty {
            for excluded in option.excludes {
                if let other = command.options.first(where: { $0.long == excluded }), !values(other).isEmpty {
                    throw .usage(
                        "options '--\(option.long)' and '--\(other.long)' cannot be used together",
                        hint: "see 'portal-token \(command.name) --help'")
                }
                if let positional = command.positionals.first(where: { $0.name == excluded }), !operands.isEmpty {
                    throw .usage(
                        "option '--\(option.long)' takes no \(positional.name)",
                        hint: "see 'portal-token \(command.name) --help'")
                }
            }
        }
    }

    /// Fails on an operand beyond those the command declares. A stray word is named only when it
    /// cannot be private (a plain word, no digits, no `@`, and not after a command about
    /// passphrases): a token, an address or a passphrase typed in the wrong place is never echoed.
    func checkOperandCount() throws(CLIError) {
        guard let command, !command.runsProgram, operands.count > command.positionals.count else { return }
        let stray = operands[command.positionals.count]
        let hint = "see 'portal-token \(command.name) --help'"
        if !command.takesSecrets, Suggestion.isShowable(stray) {
            throw .usage("unexpected argument '\(stray)' for '\(command.name)'", hint: hint)
        }
        throw .usage("'\(command.name)' takes no further arguments", hint: hint)
    }

    /// Reads options from `words`, operands aside, up to `--` (after which every word is an
    /// operand) or, with `endsAtOperand`, up to the first operand; returns the words from there.
    private mutating func read(
        _ words: ArraySlice<String>, options: [OptionSpec], endsAtOperand: Bool
    ) throws(CLIError) -> ArraySlice<String> {
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            if word == "--" {
                operands += words[(index + 1)...]
                return []
            }
            guard word.hasPrefix("-"), word != "-" else {
                if endsAtOperand { return words[index...] }
                operands.append(word)
                index += 1
                continue
            }
            index += 1
            let spelling = word.hasPrefix("--") ? String(word.prefix { $0 != "=" }) : word
            let inline = spelling.count < word.count ? String(word.dropFirst(spelling.count + 1)) : nil
            guard let option = options.first(where: { $0.spellings.contains(spelling) }) else {
                throw unknown(spelling, among: options)
            }
            if option.long == OptionSpec.help.long {
                wantsHelp = true
                return words[index...]
            }
            guard values[option.long] == nil || option.repeatable else {
                throw .usage("option '\(spelling)' is given more than once", hint: helpHint)
            }
            var value = ""
            if option.takesValue {
                if let inline {
                    value = inline
                } else if index < words.endIndex {
                    let next = words[index]
                    let nextName = next.hasPrefix("--") ? String(next.prefix { $0 != "=" }) : next
                    if options.contains(where: { $0.spellings.contains(nextName) }) {
                        throw .usage(
                            "option '\(spelling)' needs a value, but '\(nextName)' is an option",
                            hint: "give the value, or write \(spelling)=VALUE for a value that starts with '-'")
                    }
                    value = next
                    index += 1
                } else {
                    throw .usage("option '\(spelling)' needs a value", hint: helpHint)
                }
            } else if let inline {
                // A settings switch takes `--verbose=VALUE`, as its environment variable does.
                guard option.setting != nil else {
                    throw .usage("option '\(spelling)' takes no value", hint: helpHint)
                }
                value = inline
            } else if option.setting != nil {
                value = "1"
            }
            values[option.long, default: []].append(value)
        }
        return []
    }

    /// "unknown option", with the nearest known one when it is close (as git does), or where a
    /// settings flag goes when it stands after the command name of `exec`.
    private func unknown(_ spelling: String, among options: [OptionSpec]) -> CLIError {
        let name = String(spelling.prefix(64))
        guard let command else {
            return .usage(
                "unknown option '\(name)'",
                hint: Suggestion.hint(for: name, among: options.flatMap(\.spellings), command: nil))
        }
        if command.runsProgram, OptionTable.settings.contains(where: { $0.spellings.contains(spelling) }) {
            return .usage(
                "option '\(name)' goes before '\(command.name)', not after it",
                hint: "write 'portal-token \(name) ... \(command.name) ...'; after the program it is the program's")
        }
        return .usage(
            "unknown option '\(name)' for '\(command.name)'",
            hint: Suggestion.hint(for: name, among: options.flatMap(\.spellings), command: command.name))
    }

    private var helpHint: String {
        command.map { "see 'portal-token \($0.name) --help'" } ?? "see 'portal-token --help'"
    }
}
