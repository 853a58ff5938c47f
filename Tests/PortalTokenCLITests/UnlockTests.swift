import Foundation
import PortalTokenTestSupport
import Testing

/// `portal-token unlock` against a real gnome-keyring on a private bus, over a terminal with no
/// display, as over ssh (docs/storage.md, "Unlocking from a terminal").
@Suite("unlock from a terminal")
struct UnlockTests {
    let request = "protocol=https\nhost=unlock.example\n\n"
    let credential = "protocol=https\nhost=unlock.example\nusername=u\npassword=p\n\n"

    /// A keyring holding one credential, then locked.
    private func lockedKeyring() throws -> PrivateKeyring {
        let keyring = try PrivateKeyring(withKeyring: true)
        let stored = try ProcessRunner.portalToken(["store"], stdin: credential, environment: keyring.environment)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        try keyring.lockLoginCollection()
        return keyring
    }

    @Test("the password typed on the terminal unlocks gnome-keyring, after a wrong one; get works after it")
    func unlocksAfterAWrongPassword() throws {
        let keyring = try lockedKeyring()
        let locked = try ProcessRunner.portalToken(["get"], stdin: request, environment: keyring.environment)
        #expect(locked.exitCode == 4)
        #expect(locked.stderr.contains("'portal-token unlock'"), "the hint names the command: \(locked.stderr)")

        let terminal = try TerminalProcess(ProcessRunner.portalTokenPath, ["unlock"], environment: keyring.environment)
        try terminal.waitFor("Password for the default keyring: ")
        terminal.type("not-the-password\n")
        try terminal.waitFor("Password for the default keyring: ", occurrences: 2)
        terminal.type("test-password\n")
        #expect(try terminal.finish() == 0, "\(terminal.text)")
        #expect(terminal.text.contains("Wrong password; try again."))
        #expect(terminal.text.contains("portal-token: unlocked the default keyring"))
        // Typed with echo off: neither password is shown.
        #expect(!terminal.text.contains("test-password") && !terminal.text.contains("not-the-password"))

        let found = try ProcessRunner.portalToken(["get"], stdin: request, environment: keyring.environment)
        #expect(found.exitCode == 0 && found.stdout == "username=u\npassword=p\n", "\(found.stderr)")
        let again = try ProcessRunner.portalToken(["unlock"], stdin: "", environment: keyring.environment)
        #expect(again.exitCode == 0)
        #expect(again.stderr == "portal-token: the default keyring is already unlocked\n")
    }

    @Test("three wrong passwords are exit 4 and the keyring stays locked")
    func threeWrongPasswords() throws {
        let keyring = try lockedKeyring()
        let terminal = try TerminalProcess(ProcessRunner.portalTokenPath, ["unlock"], environment: keyring.environment)
        for attempt in 1...3 {
            try terminal.waitFor("Password for the default keyring: ", occurrences: attempt)
            terminal.type("wrong-\(attempt)\n")
        }
        #expect(try terminal.finish() == 4, "\(terminal.text)")
        #expect(terminal.text.contains("3 wrong passwords were typed; the default keyring stays locked"))
        let locked = try ProcessRunner.portalToken(["get"], stdin: request, environment: keyring.environment)
        #expect(locked.exitCode == 4, "\(locked.stderr)")
    }

    @Test("with no terminal, or prompts ruled out, nothing is asked: exit 4 at once")
    func neverAsksWhereNobodyCanAnswer() throws {
        let keyring = try lockedKeyring()
        let piped = try ProcessRunner.portalToken(
            ["unlock"], stdin: "test-password\n", environment: keyring.environment)
        #expect(piped.exitCode == 4)
        #expect(piped.stderr.contains("there is no terminal to ask its password on"), "\(piped.stderr)")
        var environment = keyring.environment
        environment["GIT_TERMINAL_PROMPT"] = "0"
        let terminal = try TerminalProcess(ProcessRunner.portalTokenPath, ["unlock"], environment: environment)
        #expect(try terminal.finish() == 4, "\(terminal.text)")
        #expect(!terminal.text.contains("Password for"))
        #expect(terminal.text.contains("GIT_TERMINAL_PROMPT=0 rules out asking"), "\(terminal.text)")
        let locked = try ProcessRunner.portalToken(["get"], stdin: request, environment: keyring.environment)
        #expect(locked.exitCode == 4, "the keyring is still locked: \(locked.stderr)")
    }

    @Test("with the encrypted file in use, unlock opens it and later commands use the kept key")
    func opensTheEncryptedFile() throws {
        let keyring = try PrivateKeyring(withKeyring: false)
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = "file"
        let empty = try ProcessRunner.portalToken(["unlock"], stdin: "", environment: environment)
        #expect(empty.exitCode == 0)
        #expect(empty.stderr.contains("nothing to unlock"), "\(empty.stderr)")
        environment["PORTAL_TOKEN_PASSPHRASE"] = "file passphrase"
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment).exitCode == 0)
        let opened = try ProcessRunner.portalToken(["unlock"], stdin: "", environment: environment)
        #expect(opened.exitCode == 0, "\(opened.stderr)")
        #expect(opened.stderr.contains(" is open"), "\(opened.stderr)")
        // The key is kept: a read with no passphrase source at all still opens the file.
        environment["PORTAL_TOKEN_PASSPHRASE"] = nil
        let found = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment)
        #expect(found.exitCode == 0 && found.stdout == "username=u\npassword=p\n", "\(found.stderr)")
    }
}
