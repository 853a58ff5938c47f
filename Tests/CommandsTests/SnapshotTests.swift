import Foundation
@testable import Commands
@testable import Operations
import PortalTokenTestSupport
import Testing

/// The text users read, compared exactly with what is committed under Snapshots/: `--help`, each
/// `COMMAND --help`, and what `portal-token-docgen` writes into the shell completions, the man
/// page and docs/commands.md. A change to any of them shows in review as a change to a snapshot.
///
/// To accept a change, run the tests with PORTAL_TOKEN_UPDATE_SNAPSHOTS=1 (they then write the
/// snapshots instead of comparing) and commit the result, e.g.
/// `PORTAL_TOKEN_UPDATE_SNAPSHOTS=1 swift test --skip-build --disable-xctest --filter Snapshot`.
@Suite("snapshots of help, completions and man page")
struct SnapshotTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Snapshots")
    static let root = directory.deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let updating = ProcessInfo.processInfo.environment["PORTAL_TOKEN_UPDATE_SNAPSHOTS"] == "1"

    /// Compares `actual` with the snapshot `name`, or writes it when updating.
    static func expectSnapshot(_ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let path = directory.appendingPathComponent(name).path
        if updating {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try actual.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        let expected = try? String(contentsOfFile: path, encoding: .utf8)
        #expect(
            expected == actual,
            "Snapshots/\(name) differs; if the change is meant, refresh with PORTAL_TOKEN_UPDATE_SNAPSHOTS=1",
            sourceLocation: sourceLocation)
    }

    @Test("portal-token --help")
    func overview() throws {
        let result = try InProcessCLI().run(["--help"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        try Self.expectSnapshot(result.stdout, "help.txt")
    }

    @Test("COMMAND --help", arguments: OptionTable.commands.map(\.name))
    func commandHelp(command: String) throws {
        let result = try InProcessCLI().run([command, "--help"])
        #expect(result.exitCode == 0 && result.stderr.isEmpty)
        try Self.expectSnapshot(result.stdout, "\(command).help.txt")
    }

    /// The generated regions of the completions, the man page and docs/commands.md, as
    /// `portal-token-docgen` writes them into copies of the committed files.
    @Test("the generated parts of the shell completions, the man page and the command list")
    func generated() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-snapshot-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let man = "contrib/man/portal-token.1"
        let files: [(path: String, snapshot: String, begin: String, end: String)] =
            [
                ("contrib/completions/portal-token.bash", "portal-token.bash", "# BEGIN GENERATED", "# END GENERATED"),
                ("contrib/completions/_portal-token", "_portal-token", "# BEGIN GENERATED", "# END GENERATED"),
                ("contrib/completions/portal-token.fish", "portal-token.fish", "# BEGIN GENERATED", "# END GENERATED"),
                ("docs/commands.md", "commands.md", "<!-- BEGIN GENERATED", "<!-- END GENERATED"),
            ]
            + ["SYNOPSIS", "SETTINGS", "COMMANDS", "OPTIONS", "EXIT STATUS"].map { section in
                (
                    man, "portal-token.1." + section.lowercased().replacingOccurrences(of: " ", with: "-"),
                    ".\\\" BEGIN GENERATED \(section) ", ".\\\" END GENERATED \(section)\n"
                )
            }
        for file in Set(files.map(\.path)) {
            let copy = scratch.appendingPathComponent(file)
            try FileManager.default.createDirectory(
                at: copy.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: Self.root.appendingPathComponent(file), to: copy)
        }
        let docgen = URL(fileURLWithPath: ProcessRunner.portalTokenPath).deletingLastPathComponent()
            .appendingPathComponent("portal-token-docgen").path
        let result = try ProcessRunner.run(docgen, [scratch.path])
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
        for file in files {
            let text = try String(contentsOf: scratch.appendingPathComponent(file.path), encoding: .utf8)
            let begin = try #require(text.range(of: file.begin), "\(file.path): no \(file.begin)")
            let start = try #require(text[begin.upperBound...].firstIndex(of: "\n"))
            let end = try #require(text.range(of: file.end, range: start..<text.endIndex))
            try Self.expectSnapshot(String(text[text.index(after: start)..<end.lowerBound]), file.snapshot)
        }
    }
}
