import Operations
import PortalTokenCore

/// A subcommand: its name and help, how it reads its arguments, and what it does.
protocol Command: SendableMetatype {
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// What `portal-token NAME --help` prints after the usage.
    static var details: String { get }

    /// What the audit log calls it; nil for a command that hands out, takes in or removes no
    /// credential (docs/audit.md, "When a line is written").
    static var auditOperation: AuditOperation? { get }

    /// Whether it changes the agent's store in a way the agent serves no client (sign-in,
    /// sign-out, migrate, unlock): in client mode it is refused, naming the agent.
    static var isRefusedInClientMode: Bool { get }

    init(arguments: ParsedArguments) throws(CLIError)
    func run(in context: Context) throws
}

extension Command {
    static var auditOperation: AuditOperation? { nil }
    static var isRefusedInClientMode: Bool { false }

    /// The command's entry in the option table.
    static var spec: CommandSpec? { OptionTable.command(named: name) }

    /// The usage line(s) from the option table, without the leading "usage: ".
    static var usage: String { spec?.usage ?? "portal-token \(name)" }

    static var helpText: String {
        let options = spec?.optionsText ?? ""
        return "usage: \(usage)\n\n\(summary)\n" + (options.isEmpty ? "" : "\n\(options)")
            + (details.isEmpty ? "" : "\n\(details)\n")
    }
}
