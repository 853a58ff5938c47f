import Commands
import Operations
import PortalTokenCore

/// The command list the shells offer: every command, then `help`.
let commandEntries: [(name: String, summary: String)] =
    OptionTable.commands.map { ($0.name, $0.summary) } + [("help", "Show the help of a command")]

func lowercasedFirst(_ text: String) -> String { text.prefix(1).lowercased() + text.dropFirst() }
func capitalizedFirst(_ text: String) -> String { text.prefix(1).uppercased() + text.dropFirst() }

/// Every option of every command and every settings flag, each spelling once, with its spec.
func allOptionsBySpelling() -> [(spelling: String, option: OptionSpec)] {
    var seen: Set<String> = []
    var result: [(String, OptionSpec)] = []
    for option in OptionTable.settings + OptionTable.commands.flatMap(\.options) {
        for spelling in option.spellings where seen.insert(spelling).inserted { result.append((spelling, option)) }
    }
    return result
}

enum Bash {
    static func quoted(_ text: String) -> String {
        "\""
            + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "$", with: "\\$").replacingOccurrences(of: "`", with: "\\`") + "\""
    }

    static func region() -> String {
        var out = "# The commands, each with its one-line description.\n_portal_token_commands=(\n"
        for entry in commandEntries { out += "    " + quoted(entry.name + ":" + lowercasedFirst(entry.summary)) + "\n" }
        out += ")\n\n# Settings flags: accepted before the command name, and after it except for exec.\n"
        let settingNames = OptionTable.settings.map { "--" + $0.long }.joined(separator: " ")
        out += "_portal_token_setting_options=\"\(settingNames)\"\n"
        out += "# The settings flags (and per-command options) that take a value in the next word.\n"
        out +=
            "_portal_token_valued_options=\""
            + allOptionsBySpelling().filter { $0.option.takesValue }.map(\.spelling).joined(separator: " ") + "\"\n\n"
        out += "# Prints the options of one command, one a line.\n_portal_token_command_options() {\n    case $1 in\n"
        for command in OptionTable.commands where !command.options.isEmpty {
            out += "        \(command.name)) printf '%s\\n' \(command.optionNames.joined(separator: " ")) ;;\n"
        }
        out += "    esac\n}\n\n"
        out += "# Prints the words offered for the value of the option $1; returns 1 when there are none.\n"
        out += "_portal_token_words() {\n    case $1 in\n"
        for (spelling, option) in allOptionsBySpelling() where !option.words.isEmpty {
            out += "        \(spelling)) echo \"\(option.words.joined(separator: " "))\" ;;\n"
        }
        out += "        *) return 1 ;;\n    esac\n}\n\n"
        out += "# Returns 0 when the option $1 does not go with an option already in \"$2\" (\" --a -b \").\n"
        out += "_portal_token_excluded() {\n    case $1 in\n"
        for (spelling, option) in allOptionsBySpelling() {
            let others =
                option.spellings.filter { $0 != spelling }
                + option.excludes.filter { $0.lowercased() == $0 }.map { "--" + $0 }
            guard !others.isEmpty else { continue }
            let tests = others.map { "$2 == *\" \($0) \"*" }.joined(separator: " || ")
            out += "        \(spelling)) [[ \(tests) ]] ;;\n"
        }
        out += "        *) return 1 ;;\n    esac\n}\n"
        return out
    }
}

enum Zsh {
    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
    static func bracketed(_ text: String) -> String {
        text.replacingOccurrences(of: "[", with: "\\[").replacingOccurrences(of: "]", with: "\\]")
    }

    static func spec(_ option: OptionSpec) -> String {
        var exclusions = option.excludes.map { $0.lowercased() == $0 ? "--" + $0 : "1" }
        if option.short != nil && !option.repeatable { exclusions = option.spellings.reversed() + exclusions }
        let prefix = option.repeatable ? "*" : exclusions.isEmpty ? "" : "(" + exclusions.joined(separator: " ") + ")"
        var action = ""
        if option.takesValue {
            let message = option.help.components(separatedBy: ":").first!.components(separatedBy: " (").first!
                .replacingOccurrences(of: ":", with: "\\:")
            switch option.completion {
            case .text: action = ":\(message): "
            case .words(let words): action = ":\(message):(\(words.joined(separator: " ")))"
            case .file: action = ":\(message):_files"
            case .body: action = ":\(message):_portal-token_data"
            }
        }
        let help = "[" + bracketed(option.help) + "]" + action
        if let short = option.short {
            let names = option.takesValue ? "{-\(short)+,--\(option.long)=}" : "{-\(short),--\(option.long)}"
            return (prefix.isEmpty ? "" : quoted(prefix)) + names + quoted(help)
        }
        return quoted(prefix + "--" + option.long + (option.takesValue ? "=" : "") + help)
    }

    static func positional(_ positional: PositionalSpec, index: Int) -> String {
        let help = positional.help.replacingOccurrences(of: ":", with: "\\:")
        let colon = positional.optional ? "::" : ":"
        switch positional.completion {
        case .program: return quoted("*:: :_normal")
        case .subcommand: return quoted("\(index)\(colon) :_portal-token_commands")
        case .words(let words): return quoted("\(index)\(colon)\(help):(\(words.joined(separator: " ")))")
        case .text: return quoted("\(index)\(colon)\(help): ")
        }
    }

    static func region() -> String {
        var out =
            "(( $+functions[_portal-token_commands] )) ||\n"
            + "_portal-token_commands() {\n  local -a commands\n  commands=(\n"
        for entry in commandEntries {
            let summary = lowercasedFirst(entry.summary).replacingOccurrences(of: ":", with: "\\:")
            out += "    " + quoted(entry.name + ":" + summary) + "\n"
        }
        out += "  )\n  _describe -t commands 'portal-token command' commands\n}\n\n"
        out +=
            "# Settings flags: accepted before the command name, and after it except for exec.\n"
            + "typeset -ga _portal_token_settings\n_portal_token_settings=(\n"
        for option in OptionTable.settings { out += "  " + spec(option) + "\n" }
        out += ")\n\n# Completes the words after the command name $words[1].\n"
        out += "(( $+functions[_portal-token_command] )) ||\n_portal-token_command() {\n  case $words[1] in\n"
        for command in OptionTable.commands {
            // What follows the program exec runs is the program's; settings flags go before exec.
            let settings = command.runsProgram ? "" : "$_portal_token_settings "
            out +=
                "    \(command.name))\n      _arguments \(settings)\\\n"
                + "        '(- *)'{-h,--help}'[show help]'"
            for option in command.options { out += " \\\n        " + spec(option) }
            for (index, positional) in command.positionals.enumerated() {
                out += " \\\n        " + self.positional(positional, index: index + 1)
            }
            out += "\n      ;;\n"
        }
        out += "    help)\n      _arguments '1: :_portal-token_commands'\n      ;;\n"
        out += "    *)\n      _message \"unknown command: $words[1]\"\n      return 1\n      ;;\n  esac\n}\n"
        return out
    }
}

enum Fish {
    static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    static func line(_ condition: String?, _ option: OptionSpec) -> String {
        var out = "complete -c portal-token"
        if let condition { out += " -n \"\(condition)\"" }
        if let short = option.short { out += " -s \(short)" }
        out += " -l \(option.long)"
        if option.takesValue {
            switch option.completion {
            case .text: out += " -x"
            case .words(let words): out += " -x -a " + quoted(words.joined(separator: " "))
            case .file: out += " -r -F"
            case .body: out += " -x -a '(__portal_token_data)'"
            }
        }
        return out + " -d " + quoted(capitalizedFirst(option.help))
    }

    static func region() -> String {
        let names = commandEntries.map(\.name).joined(separator: " ")
        var out = "set -l commands \(names)\n\n# Commands\n"
        for entry in commandEntries {
            out +=
                "complete -c portal-token -n \"not __fish_seen_subcommand_from $commands\" -a \(entry.name) -d "
                + quoted(entry.summary) + "\n"
        }
        out +=
            "complete -c portal-token -n \"__fish_seen_subcommand_from help\""
            + " -a \"(string match -v help -- $commands)\"\n"
        out += "\n# Settings flags: accepted before the command name, and after it except for exec\n"
        for option in OptionTable.settings { out += line(nil, option) + "\n" }
        out += "complete -c portal-token -s h -l help -d 'Show help'\n"
        out +=
            "complete -c portal-token -n \"not __fish_seen_subcommand_from $commands\""
            + " -s V -l version -d 'Print the version'\n"
        for command in OptionTable.commands where !command.options.isEmpty || !command.positionals.isEmpty {
            out += "\n# \(command.name)\n"
            let seen = "__fish_seen_subcommand_from \(command.name)"
            for option in command.options {
                let group = option.excludes.filter { $0.lowercased() == $0 }
                let condition =
                    group.isEmpty
                    ? seen : seen + "; and not __fish_contains_opt " + ([option.long] + group).joined(separator: " ")
                out += line(condition, option) + "\n"
            }
            for positional in command.positionals {
                switch positional.completion {
                case .program:
                    out +=
                        "complete -c portal-token -n \"\(seen); and contains -- -- (commandline -opc)\""
                        + " -a '(__fish_complete_command)'\n"
                case .words(let words):
                    out +=
                        "complete -c portal-token -n \"\(seen)\" -a \(quoted(words.joined(separator: " ")))"
                        + " -d \(quoted(capitalizedFirst(positional.help)))\n"
                case .subcommand:
                    out += "complete -c portal-token -n \"\(seen)\" -a \"$commands\"\n"
                case .text:
                    break
                }
            }
        }
        return out
    }
}

enum Man {
    /// Text as roff: backslashes and dashes escaped, and any character beyond ASCII by its code.
    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            .unicodeScalars.map { scalar in
                guard !scalar.isASCII else { return String(scalar) }
                let hex = String(scalar.value, radix: 16, uppercase: true)
                return "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
            .joined()
    }

    static func region() -> String {
        var out = ""
        for option in OptionTable.globalOptions {
            out += ".TP\n"
            let long = "\\-\\-" + escaped(option.long)
            if let short = option.short {
                out += ".BR \\-\(short) \", \" \(long)\n"
            } else if !option.words.isEmpty && option.long != "api-host" {
                out += ".BR \(long) \" \" " + option.words.map(escaped).joined(separator: " | ") + "\n"
            } else if let value = option.valueName {
                out += ".BI \(long) \" \(escaped(value))\"\n"
            } else {
                out += ".B \(long)\n"
            }
            out += escaped(capitalizedFirst(option.help)) + ".\n"
        }
        return out
    }
}

extension Man {
    /// The EXIT STATUS list, from `ExitCode`.
    static func exitStatus() -> String {
        ExitCode.allCases.map { ".TP\n.B \($0.rawValue)\n" + escaped($0.explanation) + "\n" }.joined()
    }
}

extension Man {
    /// A command's usage line without the program name, the command word bold.
    private static func form(_ line: String, name: String) -> (command: String, rest: String) {
        let words = line.dropFirst("portal-token ".count)
        let rest = words.hasPrefix(name) ? String(words.dropFirst(name.count)) : String(words)
        return (name, rest.trimmingCharacters(in: .whitespaces))
    }

    /// A line of text as a roff text line: escaped, and never read as a request.
    private static func textLine(_ line: String) -> String {
        let text = escaped(line)
        return text.hasPrefix(".") || text.hasPrefix("'") ? "\\&" + text : text
    }

    /// A usage line's operands as a roff text line: options bold, placeholders italic.
    private static func usageLine(_ line: String) -> String {
        textLine(line)
            .replacing(#/(^|[\[ |])(\\-\\-[a-z][a-z\\-]*[a-z]|\\-[A-Za-z])\b/#) {
                "\($0.output.1)\\fB\($0.output.2)\\fR"
            }
            .replacing(#/\b[A-Z][A-Z_]+\b/#) { "\\fI\($0.output)\\fR" }
    }

    /// Prose written as plain paragraphs (a blank line between, a line indented by two spaces
    /// kept as it is) as roff paragraphs indented under the current tag.
    static func paragraphs(_ text: String) -> String {
        var out = ""
        for paragraph in text.components(separatedBy: "\n\n") where !paragraph.isEmpty {
            out += ".IP\n"
            var literal = false
            for line in paragraph.components(separatedBy: "\n") {
                let indented = line.hasPrefix("  ")
                if indented != literal { out += indented ? ".nf\n" : ".fi\n" }
                literal = indented
                out += textLine(indented ? String(line.dropFirst(2)) : line) + "\n"
            }
            if literal { out += ".fi\n" }
        }
        return out
    }

    /// The SYNOPSIS: every form of every command, from the option table.
    static func synopsis() -> String {
        OptionTable.commands.flatMap { spec in
            spec.usageLines.map { line in
                let (command, rest) = form(line, name: spec.name)
                return ".SY \\%portal\\-token\n.RI [ SETTINGS ]\n.B \(escaped(command))\n"
                    + (rest.isEmpty ? "" : usageLine(rest) + "\n") + ".YS\n"
            }
        }.joined()
    }

    /// The settings flags the SYNOPSIS's SETTINGS stands for.
    static func settingsSynopsis() -> String {
        OptionTable.settings.map { option in
            let long = "\\-\\-" + escaped(option.long)
            if !option.words.isEmpty && option.long != "api-host" {
                return ".RB [ \(long) \" \" " + option.words.map(escaped).joined(separator: " | ") + " ]\n"
            }
            return ".OP \(long)" + (option.valueName.map { " " + escaped($0) } ?? "") + "\n"
        }.joined()
    }

    /// The COMMANDS list: each command's forms, summary, details and options.
    static func commands() -> String {
        var out = ""
        for spec in OptionTable.commands {
            for (index, line) in spec.usageLines.enumerated() {
                let (command, rest) = form(line, name: spec.name)
                out +=
                    (index == 0 ? ".TP\n" : ".TQ\n") + "\\fB\(escaped(command))\\fR"
                    + (rest.isEmpty ? "" : " " + usageLine(rest)) + "\n"
            }
            out += textLine(spec.summary + ".") + "\n" + paragraphs(spec.details)
            guard !spec.options.isEmpty else { continue }
            out += ".RS\n"
            for option in spec.options {
                let spelling = (option.short.map { "-\($0), " } ?? "") + "--" + option.long
                out +=
                    ".TP\n.B \(escaped(spelling))" + (option.valueName.map { " \\fI\(escaped($0))\\fR" } ?? "")
                    + "\n" + textLine(capitalizedFirst(option.help) + ".") + "\n"
            }
            out += ".RE\n"
        }
        return out + ".TP\n\\fBhelp\\fR [\\fICOMMAND\\fR]\nThe same as \\-\\-help.\n"
    }
}

/// The command list of docs/commands.md.
enum Markdown {
    static func commands() -> String {
        var out = "| command | what it does |\n|---|---|\n"
        for spec in OptionTable.commands {
            let forms = spec.usageLines.map { "`" + $0.dropFirst("portal-token ".count) + "`" }
            out +=
                "| " + forms.joined(separator: "<br>").replacingOccurrences(of: "|", with: "\\|") + " | "
                + spec.summary + " |\n"
        }
        return out
            + "| `help [COMMAND]`<br>`COMMAND --help`<br>`--version` | Show the help of a command, or the version |\n"
    }
}
