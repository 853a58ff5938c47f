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
    /// The options the command takes, from the option table: what the parser knows, and what
    /// "did you mean" offers.
    static var optionNames: [String] { OptionTable.command(named: name)?.optionNames ?? [] }

    static var helpText: String {
        "usage: \(usage)\n\n\(summary)\n" + (details.isEmpty ? "" : "\n\(details)\n")
    }
}
