import Foundation
import Commands
import Operations

// Writes the generated regions of the shell completions, the man page and docs/commands.md from
// the option table and each command's summary and details.
// Usage: portal-token-docgen ROOT
// Only the text between the BEGIN GENERATED and END GENERATED lines of each file is replaced;
// the rest of each file is written by hand.

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: portal-token-docgen ROOT\n".utf8))
    exit(2)
}
let problems = OptionTable.disagreements
guard problems.isEmpty else {
    FileHandle.standardError.write(Data(problems.map { "portal-token-docgen: error: \($0)\n" }.joined().utf8))
    exit(1)
}
let root = arguments[1]
let files: [(path: String, begin: String, end: String, body: String)] = [
    ("contrib/completions/portal-token.bash", "# BEGIN GENERATED", "# END GENERATED", Bash.region()),
    ("contrib/completions/_portal-token", "# BEGIN GENERATED", "# END GENERATED", Zsh.region()),
    ("contrib/completions/portal-token.fish", "# BEGIN GENERATED", "# END GENERATED", Fish.region()),
    manRegion("SYNOPSIS", Man.synopsis()),
    manRegion("SETTINGS", Man.settingsSynopsis()),
    manRegion("COMMANDS", Man.commands()),
    manRegion("OPTIONS", Man.region()),
    manRegion("EXIT STATUS", Man.exitStatus()),
    ("docs/commands.md", "<!-- BEGIN GENERATED", "<!-- END GENERATED", Markdown.commands()),
]
/// A region of the man page, named by the section it is in.
func manRegion(_ name: String, _ body: String) -> (String, String, String, String) {
    ("contrib/man/portal-token.1", ".\\\" BEGIN GENERATED \(name) ", ".\\\" END GENERATED \(name)", body)
}
for file in files {
    let path = root + "/" + file.path
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        FileHandle.standardError.write(Data("portal-token-docgen: error: cannot read \(path)\n".utf8))
        exit(1)
    }
    var lines = text.components(separatedBy: "\n")
    guard let begin = lines.firstIndex(where: { $0.hasPrefix(file.begin) }),
        let end = lines.firstIndex(where: { $0.hasPrefix(file.end) }), begin < end
    else {
        FileHandle.standardError.write(Data("portal-token-docgen: error: \(path) has no generated region\n".utf8))
        exit(1)
    }
    let body = file.body.hasSuffix("\n") ? String(file.body.dropLast()) : file.body
    lines.replaceSubrange((begin + 1)..<end, with: body.components(separatedBy: "\n"))
    do {
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("portal-token-docgen: error: cannot write \(path): \(error)\n".utf8))
        exit(1)
    }
}
