import Basics
import Operations
import PortalTokenCore

struct AuditCommand: Command {
    static let name = "audit"
    static let summary = "Show what used your credentials, when and from where (the audit log)"
    static let details = """
        Reads the audit log, $XDG_STATE_HOME/portal-token/audit.jsonl
        (~/.local/state/portal-token/audit.jsonl), and audit.jsonl.1, the file it was
        last rotated to, oldest first: one row per credential event, with its time
        (UTC), operation, outcome (with the HTTP status, and whether it ended the
        session), host or auth environment, end user, token fingerprint, process ID and
        the program that asked (the one that started portal-token, git or a shell say;
        through the agent, the caller's executable, container, Flatpak app or unit, and
        the socket). The same fingerprint is the same token; a new sign-in gets a new
        one. The log holds no token, password or command line; a line that is not a JSON
        object with a time is left out. With no events to show, it says so on stderr.

        With --since, DURATION is a whole number followed by s, m, h or d (seconds,
        minutes, hours, days). With --format json, the lines are printed as they are
        stored, and nothing when there are none.

        The log is on unless the line audit-log = off is in your own config file.
        Exit 0; 2 for a wrong DURATION or with neither XDG_STATE_HOME nor HOME set, 4
        when the log cannot be read.
        """

    let json: Bool
    /// How far back to show, in seconds; nil for everything.
    let since: Int64?

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
        if let text = arguments.value(.since) {
            guard let seconds = AuditDuration.seconds(text.trimmingWhitespace) else {
                throw .usage(
                    "--since takes a duration such as 30m, 24h or 7d, not "
                        + "'\(TerminalText.escaped(String(text.prefix(32))))'",
                    hint: "a whole number followed by s, m, h or d")
            }
            since = seconds
        } else {
            since = nil
        }
    }

    func run(in context: Context) throws {
        guard let log = context.auditLog(forReading: true) else {
            throw CLIError.usage(
                "cannot find the audit log: neither XDG_STATE_HOME nor HOME is set",
                hint: "set XDG_STATE_HOME or HOME as when the commands ran")
        }
        let lines: [String]
        do {
            lines = try log.lines()
        } catch {
            throw CLIError(error.message, hint: error.hint, exitCode: .storage)
        }
        let cutoff = since.map { context.now() - $0 }
        var rows: [(line: String, entry: JSONValue)] = []
        for line in lines {
            // A line that is not an object with a time (one cut short by a full disk, or edited)
            // is left out.
            guard let entry = try? JSONValue.parse(line), let time = entry["time"]?.stringValue,
                let seconds = AuditTime.seconds(time)
            else { continue }
            if let cutoff, seconds < cutoff { continue }
            rows.append((line, entry))
        }
        if json {
            for row in rows { context.streams.print(TerminalText.escaped(row.line)) }
            return
        }
        guard !rows.isEmpty else {
            context.streams.printError("portal-token: no audit events\(since == nil ? "" : " in that time")")
            return
        }
        let table =
            [["TIME (UTC)", "OPERATION", "OUTCOME", "HOST OR ENVIRONMENT", "END USER", "TOKEN", "PID", "CALLER"]]
            + rows.map { Self.cells($0.entry) }
        let widths = (0..<table[0].count).map { column in table.map { $0[column].count }.max() ?? 0 }
        for row in table {
            var text = ""
            for (column, cell) in row.enumerated() {
                let last = column == row.count - 1
                text += last ? cell : cell + String(repeating: " ", count: widths[column] - cell.count + 2)
            }
            context.streams.print(text)
        }
    }

    /// One row of the table, every cell escaped for the terminal (docs/security.md, "Hardening rules").
    static func cells(_ entry: JSONValue) -> [String] {
        func text(_ value: JSONValue?) -> String { TerminalText.escaped(value?.stringValue ?? "-") }
        var time = entry["time"]?.stringValue ?? "-"
        // 2026-12-01T17:20:03.123456Z → 2026-12-01 17:20:03
        if time.count >= 19 { time = String(time.prefix(19)).replacingFirstT() }
        let target = entry["host"]?.stringValue ?? entry["authEnvironmentId"]?.stringValue
        var outcome = entry["outcome"]?.stringValue ?? "-"
        if let status = entry["httpStatus"]?.int64Value { outcome += " (HTTP \(status))" }
        if entry["endedSession"]?.boolValue == true { outcome += ", session ended" }
        return [
            TerminalText.escaped(time), text(entry["operation"]), TerminalText.escaped(outcome),
            TerminalText.escaped(target ?? "-"), text(entry["endUserId"]), text(entry["tokenFingerprint"]),
            entry["caller"]?["pid"]?.int64Value.map { String($0) } ?? "-",
            TerminalText.escaped(callerText(entry["caller"])),
        ]
    }

    /// The program that asked: through the agent, the peer, its identity and the socket; run
    /// directly, the program that started portal-token (git, a shell).
    static func callerText(_ caller: JSONValue?) -> String {
        guard let caller else { return "-" }
        func base(_ path: String) -> String { String(path.split(separator: "/").last ?? Substring(path)) }
        if let socket = caller["socket"]?.stringValue {
            let who = caller["executable"]?.stringValue.map(base) ?? "?"
            let identity =
                caller["containerId"]?.stringValue.map { ", container " + String($0.prefix(12)) }
                ?? caller["flatpakAppId"]?.stringValue.map { ", flatpak " + $0 }
                ?? caller["systemdUnit"]?.stringValue.map { ", unit " + $0 } ?? ""
            return who + identity + " via " + base(socket)
        }
        let parent = caller["parents"]?.arrayValue?.first?.stringValue.map(base)
        return parent ?? caller["executable"]?.stringValue.map(base) ?? "-"
    }
}

extension String {
    fileprivate func replacingFirstT() -> String {
        guard let index = firstIndex(of: "T") else { return self }
        var copy = self
        copy.replaceSubrange(index...index, with: " ")
        return copy
    }
}
