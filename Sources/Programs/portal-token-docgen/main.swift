import Foundation
import Commands

// Writes the generated regions of the shell completions and the man page from the option table.
// Usage: portal-token-docgen CONTRIB_DIRECTORY
// Only the text between the BEGIN GENERATED and END GENERATED lines of each file is replaced;
// the rest of each file is written by hand.

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: portal-token-docgen CONTRIB_DIRECTORY\n".utf8))
    exit(2)
}
let problems = OptionTable.disagreements
guard problems.isEmpty else {
    FileHandle.standardError.write(Data(problems.map { "portal-token-docgen: error: \($0)\n" }.joined().utf8))
    exit(1)
}
let directory = arguments[1]
let files: [(path: String, begin: String, end: String, body: String)] = [
    ("completions/portal-token.bash", "# BEGIN GENERATED", "# END GENERATED", Bash.region()),
    ("completions/_portal-token", "# BEGIN GENERATED", "# END GENERATED", Zsh.region()),
    ("completions/portal-token.fish", "# BEGIN GENERATED", "# END GENERATED", Fish.region()),
    ("man/portal-token.1", ".\\\" BEGIN GENERATED", ".\\\" END GENERATED", Man.region()),
    (
        "man/portal-token.1", ".\\\" BEGIN GENERATED EXIT STATUS", ".\\\" END GENERATED EXIT STATUS",
        Man.exitStatus()
    ),
]
for file in files {
    let path = directory + "/" + file.path
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
