import PortalTokenCore

/// Hand-written argument reading: `--name value`, `--name=value`, `-X value`, and bare words.
/// Settings flags (product contract §2) are accepted before or after the command name.
struct ArgumentReader {
    private var arguments: [String]
    private(set) var settingFlags: [String: String] = [:]

    init(_ arguments: [String]) { self.arguments = arguments }

    var isEmpty: Bool { arguments.isEmpty }

    /// Flags that name a setting, and the values they take.
    static let settingFlagNames: Set<String> = Set(Setting.all.compactMap(\.flag)).union(["config"])
    static let switchFlagNames: Set<String> = ["verbose"]

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

    /// Takes `--name` if present.
    mutating func flag(_ name: String) -> Bool {
        guard let index = arguments.firstIndex(of: "--\(name)") else { return false }
        arguments.remove(at: index)
        return true
    }

    /// Takes `--name VALUE`, `--name=VALUE`, or the short form `-x VALUE`.
    mutating func option(_ name: String, short: String? = nil) throws(CLIError) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument.hasPrefix("--\(name)=") {
                arguments.remove(at: index)
                return String(argument.dropFirst(name.count + 3))
            }
            if argument == "--\(name)" || (short != nil && argument == "-\(short!)") {
                guard index + 1 < arguments.count else { throw .usage("option '\(argument)' needs a value") }
                let value = arguments[index + 1]
                arguments.removeSubrange(index...(index + 1))
                return value
            }
        }
        return nil
    }

    /// Fails on anything left over, naming the first unknown option (never a bare value, which
    /// may be private).
    func finish(command: String) throws(CLIError) {
        guard let first = arguments.first else { return }
        if first.hasPrefix("-") {
            throw .usage("unknown option '\(first.prefix { $0 != "=" })' for '\(command)'",
                         hint: "see 'portal-token \(command) --help'")
        }
        throw .usage("'\(command)' takes no further arguments", hint: "see 'portal-token \(command) --help'")
    }
}
