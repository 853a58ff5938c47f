import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// `file-key --new-passphrase`: the encrypted file keyed again under a new passphrase, typed at a
/// terminal or read from a file; the old passphrase no longer opens it, and every failure leaves
/// the file byte for byte as it was (docs/storage.md, "Re-keying the file"). The TPM's side is in
/// TPMSealedFileTests.
@Suite("file-key changes the file's passphrase")
struct FileKeyTests {
    /// A file store holding one credential under `passphrase`, its key cache off.
    final class Bed {
        let directory: URL
        let environment: [String: String]
        let host = GitHarness.uniqueHost("file-key")

        init(passphrase: String) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-fk-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            environment = ProcessRunner.environment([
                "PORTAL_TOKEN_BACKEND": "file", "PORTAL_TOKEN_FILE": directory.appendingPathComponent("store").path,
                "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "0", "PORTAL_TOKEN_PASSPHRASE": nil,
                "PORTAL_TOKEN_PASSPHRASE_FILE": nil, "CREDENTIALS_DIRECTORY": nil, "PORTAL_TOKEN_AGENT_SOCK": nil,
            ])
            let stored = try ProcessRunner.portalToken(
                ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=kept\n\n",
                environment: with(passphrase))
            guard stored.exitCode == 0 else { throw BedFailure("store failed: \(stored.stderr)") }
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        func with(_ passphrase: String?) -> [String: String] {
            environment.merging(["PORTAL_TOKEN_PASSPHRASE": passphrase ?? ""]) { $1 }
        }

        var bytes: Data { (try? Data(contentsOf: directory.appendingPathComponent("store"))) ?? Data() }

        func get(_ passphrase: String?) throws -> ProcessResult {
            try ProcessRunner.portalToken(
                ["get"], stdin: "protocol=https\nhost=\(host)\n\n", environment: with(passphrase))
        }

        /// A file holding `text`, mode 0600.
        func file(_ name: String, _ text: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            chmod(path, 0o600)
            return path
        }
    }

    /// Types `passphrase` at the new passphrase's prompt (once it is shown, unless `prompted`
    /// already), then `repeated` at the prompt that asks for it again.
    static func typeNewPassphrase(
        _ terminal: TerminalProcess, _ passphrase: String, repeated: String? = nil, prompted: Bool = false
    ) throws {
        if !prompted { try terminal.waitFor("New passphrase: ") }
        terminal.type(passphrase + "\n")
        try terminal.waitFor("Repeat it: ")
        terminal.type((repeated ?? passphrase) + "\n")
    }

    @Test("typed at the terminal: the old passphrase is asked first, the new one twice, and only the new one opens")
    func typed() throws {
        let bed = try Bed(passphrase: "old passphrase")
        let terminal = try TerminalProcess(
            ProcessRunner.portalTokenPath, ["file-key", "--new-passphrase"], environment: bed.environment)
        try terminal.waitFor("Passphrase for the portal-token store")
        terminal.type("old passphrase\n")
        try Self.typeNewPassphrase(terminal, "new passphrase")
        #expect(try terminal.finish() == 0, "\(terminal.text)")
        #expect(terminal.text.contains("A new passphrase for the encrypted store"), "\(terminal.text)")
        #expect(terminal.text.contains("under its new passphrase; file key: the passphrase"), "\(terminal.text)")
        #expect(!terminal.text.contains("new passphrase\r\n"), "the passphrase was echoed: \(terminal.text)")
        let opened = try bed.get("new passphrase")
        #expect(opened.exitCode == 0 && opened.stdout.contains("password=kept\n"), "\(opened.stderr)")
        let old = try bed.get("old passphrase")
        #expect(old.exitCode == 4 && old.stderr.contains("wrong passphrase"), "\(old.stderr)")
    }

    @Test("two different new passphrases typed: exit 4, the file as it was")
    func mistyped() throws {
        let bed = try Bed(passphrase: "old passphrase")
        let before = bed.bytes
        let terminal = try TerminalProcess(
            ProcessRunner.portalTokenPath, ["file-key", "--new-passphrase"],
            environment: bed.with("old passphrase"))
        try Self.typeNewPassphrase(terminal, "one", repeated: "another")
        #expect(try terminal.finish() == 4, "\(terminal.text)")
        #expect(terminal.text.contains("the two passphrases differ"), "\(terminal.text)")
        #expect(bed.bytes == before)
        #expect(try bed.get("old passphrase").exitCode == 0)
    }

    @Test("from a file: the new passphrase opens, the old does not, and status still reads it")
    func fromFile() throws {
        let bed = try Bed(passphrase: "old passphrase")
        let file = try bed.file("new", "passphrase from a file\n")
        let rekeyed = try ProcessRunner.portalToken(
            ["file-key", "--new-passphrase-file", file], environment: bed.with("old passphrase"))
        #expect(rekeyed.exitCode == 0, "\(rekeyed.stderr)")
        #expect(rekeyed.stdout.isEmpty)
        #expect(!rekeyed.stderr.contains("passphrase from a file"), "the passphrase reached stderr")
        #expect(try bed.get("passphrase from a file").stdout.contains("password=kept\n"))
        #expect(try bed.get("old passphrase").exitCode == 4)
    }

    enum Refusal: String, CaseIterable, CustomStringConvertible {
        case wrongPassphrase = "a wrong current passphrase"
        case emptyNew = "an empty new passphrase file"
        case missingNew = "a new passphrase file that is not there"
        case noTerminal = "no terminal to type the new one on"
        var description: String { rawValue }
    }

    @Test(
        "a refused re-key is exit 4 with a line saying why, the file byte for byte as it was",
        arguments: Refusal.allCases)
    func refused(_ refusal: Refusal) throws {
        let bed = try Bed(passphrase: "old passphrase")
        let before = bed.bytes
        var arguments = ["file-key", "--new-passphrase-file", try bed.file("new", "new one")]
        var environment = bed.with("old passphrase")
        let expected: String
        switch refusal {
        case .wrongPassphrase:
            environment = bed.with("not it")
            expected = "wrong passphrase"
        case .emptyNew:
            arguments[2] = try bed.file("empty", "\n")
            expected = "is empty"
        case .missingNew:
            arguments[2] = bed.directory.appendingPathComponent("absent").path
            expected = "cannot read the passphrase from --new-passphrase-file"
        case .noTerminal:
            arguments = ["file-key", "--new-passphrase"]
            expected = "no terminal to ask for the new passphrase on"
        }
        let result = try ProcessRunner.portalToken(arguments, environment: environment)
        #expect(result.exitCode == 4, "\(result.stderr)")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        for secret in ["old passphrase", "not it", "new one"] {
            #expect(!result.stderr.contains(secret), "\(secret) reached stderr")
        }
        #expect(bed.bytes == before)
        #expect(try bed.get("old passphrase").exitCode == 0)
    }

    @Test("while the new passphrase is being typed, other writes go on, and the re-keyed file keeps what they wrote")
    func writesWhileAsking() throws {
        let bed = try Bed(passphrase: "old passphrase")
        let terminal = try TerminalProcess(
            ProcessRunner.portalTokenPath, ["file-key", "--new-passphrase"], environment: bed.with("old passphrase"))
        try terminal.waitFor("New passphrase: ")
        // The store lock is not held while a person types: git's writes do not wait on it.
        let other = GitHarness.uniqueHost("file-key-other")
        let stored = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=\(other)\nusername=u\npassword=written-meanwhile\n\n",
            environment: bed.with("old passphrase"), timeout: 10)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        try Self.typeNewPassphrase(terminal, "new passphrase", prompted: true)
        #expect(try terminal.finish() == 0, "\(terminal.text)")
        #expect(try bed.get("new passphrase").stdout.contains("password=kept\n"))
        let meanwhile = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=\(other)\n\n", environment: bed.with("new passphrase"))
        #expect(meanwhile.stdout.contains("password=written-meanwhile\n"), "\(meanwhile.stderr)")
    }

    @Test("re-keyed by another process while the new passphrase was typed: exit 4, and the other's key stands")
    func rekeyedMeanwhile() throws {
        let bed = try Bed(passphrase: "old passphrase")
        let terminal = try TerminalProcess(
            ProcessRunner.portalTokenPath, ["file-key", "--new-passphrase"], environment: bed.with("old passphrase"))
        try terminal.waitFor("New passphrase: ")
        let other = try ProcessRunner.portalToken(
            ["file-key", "--new-passphrase-file", try bed.file("other", "the other passphrase")],
            environment: bed.with("old passphrase"), timeout: 10)
        #expect(other.exitCode == 0, "\(other.stderr)")
        let rekeyed = bed.bytes
        try Self.typeNewPassphrase(terminal, "typed passphrase", prompted: true)
        #expect(try terminal.finish() == 4, "\(terminal.text)")
        #expect(terminal.text.contains("was re-keyed or removed by another process meanwhile"), "\(terminal.text)")
        #expect(bed.bytes == rekeyed)
        #expect(try bed.get("the other passphrase").stdout.contains("password=kept\n"))
        #expect(try bed.get("typed passphrase").exitCode == 4)
    }

    @Test("a stray word after file-key is never echoed: it may be a passphrase typed in the wrong place")
    func strayWordNotEchoed() throws {
        let bed = try Bed(passphrase: "p")
        let result = try ProcessRunner.portalToken(
            ["file-key", "--new-passphrase", "hunter"], environment: bed.with("p"))
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(result.stderr.contains("'file-key' takes no further arguments"), "\(result.stderr)")
        #expect(!result.stderr.contains("hunter"))
    }

    @Test("no store file: nothing to re-key, exit 0, and no file made")
    func nothingThere() throws {
        let bed = try Bed(passphrase: "p")
        try FileManager.default.removeItem(at: bed.directory.appendingPathComponent("store"))
        let result = try ProcessRunner.portalToken(["file-key"], environment: bed.with("p"))
        #expect(result.exitCode == 0 && result.stderr.contains("nothing to re-key"), "\(result.stderr)")
        #expect(bed.bytes.isEmpty)
    }
}
