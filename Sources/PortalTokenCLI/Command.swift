/// A subcommand: its name and help, how it reads its arguments, and what it does.
protocol Command: SendableMetatype {
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// The usage line(s), without the leading "usage: ".
    static var usage: String { get }
    /// What `portal-token NAME --help` prints after the usage.
    static var details: String { get }

    init(arguments: inout ArgumentReader) throws(CLIError)
    func run(in context: Context) throws
}

extension Command {
    /// The options the command takes, for "did you mean": those its usage line shows.
    static var optionNames: [String] {
        var names: [String] = []
        for word in usage.split(whereSeparator: { " []|<>=".contains($0) }) where word.hasPrefix("-") && word != "--" {
            if !names.contains(String(word)) { names.append(String(word)) }
        }
        return names
    }

    static var helpText: String {
        "usage: \(usage)\n\n\(summary)\n" + (details.isEmpty ? "" : "\n\(details)\n")
    }
}
