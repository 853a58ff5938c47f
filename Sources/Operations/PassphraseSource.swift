import Basics
import Glibc
import PortalTokenCore

/// Where the encrypted file store's passphrase comes from, in the order of (docs/settings.md, "Passphrase sources"):
///
/// 1. `PORTAL_TOKEN_PASSPHRASE_FILE` (or `passphrase-file` in the config file): the file's
///    contents, less one trailing newline (`\n` or `\r\n`), so that `echo secret > file` works;
/// 2. `PORTAL_TOKEN_PASSPHRASE`;
/// 3. `$CREDENTIALS_DIRECTORY/portal-token.passphrase`, a systemd credential
///    (systemd.exec(5), `LoadCredential=`), read like the passphrase file;
/// 4. a prompt on `/dev/tty` with echo off, only when stdin or stderr is a terminal and no
///    setting rules prompts out (docs/settings.md, "Non-interactive callers").
///
/// With none of them, the store cannot be opened: exit 4 and a hint that lists them (and the
/// setting that ruled the prompt out, if one did). The passphrase itself never reaches a
/// message; only where it came from does.
package struct PassphraseSource {
    package static let environmentVariable = "PORTAL_TOKEN_PASSPHRASE"
    package static let systemdCredentialName = "portal-token.passphrase"
    /// Longer than any passphrase a person types or a password manager generates.
    package static let maximumLength = 4096

    package let settings: Settings
    package let environment: [String: String]
    package let streams: StandardStreams
    /// The store file, for the prompt.
    package let storePath: String
    /// Whether the prompt may be shown; asked only when no other source has the passphrase.
    package let promptPermission: () -> PromptPermission

    package init(
        settings: Settings, environment: [String: String], streams: StandardStreams, storePath: String,
        promptPermission: @escaping () -> PromptPermission
    ) {
        (self.settings, self.environment, self.streams) = (settings, environment, streams)
        (self.storePath, self.promptPermission) = (storePath, promptPermission)
    }

    /// The sources that need nobody at a terminal: the file, the variable, the systemd credential.
    package static let unattendedSourcesHint =
        "set PORTAL_TOKEN_PASSPHRASE_FILE to a file holding it (or passphrase-file in the config file), "
        + "or PORTAL_TOKEN_PASSPHRASE, or pass the systemd credential \(systemdCredentialName)"

    package func passphrase(for purpose: PassphrasePurpose) throws(StoreError) -> Passphrase {
        if let path = settings.value(.passphraseFile) {
            return try contents(of: path, origin: "\(settings.origin(of: .passphraseFile)) (\(path))")
        }
        if let value = environment[Self.environmentVariable], !value.isEmpty {
            return Passphrase(Secret(value), origin: Self.environmentVariable)
        }
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let path = directory + "/" + Self.systemdCredentialName
            if access(path, F_OK) == 0 {
                return try contents(of: path, origin: "the systemd credential \(path)")
            }
        }
        let typed = try typed(for: purpose) { setting in
            StoreError(
                .locked,
                "no passphrase for the encrypted file store \(storePath), and \(setting) rules out asking for it",
                hint: Self.unattendedSourcesHint)
        }
        if let typed { return typed }
        throw StoreError(
            .locked, "no passphrase for the encrypted file store \(storePath)",
            hint: Self.unattendedSourcesHint + ", or run portal-token in a terminal to be asked")
    }

    /// The passphrase `file-key` re-keys the file under: `file`'s contents, read as the
    /// passphrase file is, else typed twice at the terminal.
    package func newPassphrase(file: String?) throws(StoreError) -> Passphrase {
        if let file { return try contents(of: file, origin: "--new-passphrase-file (\(file))") }
        let typed = try typed(for: .change) { setting in
            StoreError(
                .locked, "\(setting) rules out asking for the new passphrase",
                hint: "give it with --new-passphrase-file")
        }
        if let typed { return typed }
        throw StoreError(
            .locked, "there is no terminal to ask for the new passphrase on", hint: "give it with --new-passphrase-file"
        )
    }

    /// The passphrase typed at the terminal, where a prompt may be shown; nil when there is no
    /// terminal to ask on. A setting that rules the prompt out is the error `ruledOut` makes.
    private func typed(for purpose: PassphrasePurpose, ruledOut: (String) -> StoreError) throws(StoreError)
        -> Passphrase?
    {
        switch promptPermission() {
        case .allowed: return try TerminalPrompt()?.ask(for: purpose, storePath: storePath)
        case .ruledOut(let setting): throw ruledOut(setting)
        case .noTerminal: return nil
        }
    }

    /// The file must be a regular one, opened without blocking (a FIFO is refused at once,
    /// never waited on: docs/storage.md, "Paths"); one that group or others may read still works,
    /// with a warning, since refusing it would lock the user out of their own store.
    private func contents(of path: String, origin: String) throws(StoreError) -> Passphrase {
        let file: RegularFile
        do {
            file = try RegularFile(path)
        } catch .notRegular {
            throw StoreError(
                .locked, "the passphrase file from \(origin) is not a regular file",
                hint: "point it at a file holding the passphrase")
        } catch {
            throw StoreError(
                .locked, "cannot read the passphrase from \(origin): \(error.reason)",
                hint: "put the passphrase on the first line of that file")
        }
        if file.status.st_mode & 0o044 != 0 {
            let mode = String(file.status.st_mode & 0o777, radix: 8)
            streams.printError(
                "portal-token: warning: the passphrase file from \(origin) is readable by other users (mode \(mode))")
            streams.printError("hint: restrict it with 'chmod 600 \(path)'")
        }
        // One read into a buffer that is wiped afterwards; a longer file is not a passphrase.
        var buffer = [UInt8](repeating: 0, count: Self.maximumLength + 2)
        defer { zeroize(&buffer) }
        var count: Int
        do {
            count = try file.read(into: &buffer)
        } catch {
            throw StoreError(.locked, "cannot read the passphrase from \(origin): \(error.reason)")
        }
        if count > 0, buffer[count - 1] == UInt8(ascii: "\n") {
            count -= 1
            if count > 0, buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        }
        guard count <= Self.maximumLength else {
            throw StoreError(
                .locked, "the passphrase from \(origin) is longer than \(Self.maximumLength) bytes",
                hint: "put only the passphrase in that file")
        }
        return Passphrase(Secret(bytes: Array(buffer[0..<count])), origin: origin)
    }
}

/// A question on the controlling terminal with echo off, as getpass(3) asks but with the
/// terminal restored even when the user presses Ctrl-C. Also where a sign-in shows what only
/// the person at the terminal may see (a two-factor enrollment), never stderr, which may be a
/// log file.
package struct TerminalPrompt {
    private let descriptor: Int32

    package init?() {
        descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        if descriptor < 0 { return nil }
    }

    package func close() { _ = Glibc.close(descriptor) }

    package func ask(for purpose: PassphrasePurpose, storePath: String) throws(StoreError) -> Passphrase {
        defer { close() }
        let origin = "the terminal"
        switch purpose {
        case .unlock, .unlockAgain:
            if purpose == .unlockAgain { say("Wrong passphrase; try again.\n") }
            let answer = read(prompt: "Passphrase for the portal-token store \(storePath): ")
            return Passphrase(answer, origin: origin, isTyped: true)
        case .create, .change:
            say(
                purpose == .create
                    ? "Creating the encrypted store \(storePath).\n"
                    : "A new passphrase for the encrypted store \(storePath).\n")
            let first = read(prompt: "New passphrase: ")
            guard !first.isEmpty else {
                throw StoreError(
                    .locked, "no passphrase was given", hint: "an empty passphrase would not protect the store")
            }
            let second = read(prompt: "Repeat it: ")
            guard first == second else {
                throw StoreError(
                    .locked, "the two passphrases differ",
                    hint: "run the command again and type the same passphrase twice")
            }
            return Passphrase(first, origin: origin, isTyped: true)
        }
    }

    package func say(_ text: String) {
        var bytes = Array(text.utf8)
        _ = write(descriptor, &bytes, bytes.count)
    }

    /// Writes a secret to the terminal (a QR code, an enrollment secret) and wipes the copy.
    package func show(_ secret: Secret) {
        secret.withBytes { bytes in _ = write(descriptor, bytes.baseAddress, bytes.count) }
    }

    /// One line typed with echo off, without its line ending.
    package func read(prompt: String) -> Secret {
        var saved = termios()
        let isTerminal = tcgetattr(descriptor, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO | ECHOE | ECHOK | ECHONL)
            terminalRestore.save(descriptor: descriptor, settings: saved)
            tcsetattr(descriptor, TCSAFLUSH, &quiet)
        }
        // Asked only once echo is off and earlier keystrokes are flushed: whatever is typed
        // after the question appears is kept.
        say(prompt)
        defer {
            if isTerminal {
                tcsetattr(descriptor, TCSAFLUSH, &saved)
                terminalRestore.clear()
            }
            say("\n")
        }
        var line: [UInt8] = []
        line.reserveCapacity(PassphraseSource.maximumLength + 1)
        defer { zeroize(&line) }
        var byte: UInt8 = 0
        while line.count <= PassphraseSource.maximumLength {
            let got = Glibc.read(descriptor, &byte, 1)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 || byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        byte = 0
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return Secret(bytes: line)
    }
}

/// What a signal handler needs to give the terminal its echo back: the handler can capture
/// nothing, so the saved settings live here while a prompt is open.
private let terminalRestore = TerminalRestore()

private final class TerminalRestore: @unchecked Sendable {
    nonisolated(unsafe) static var descriptor: Int32 = -1
    nonisolated(unsafe) static var settings = termios()

    package func save(descriptor: Int32, settings: termios) {
        Self.settings = settings
        Self.descriptor = descriptor
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            Glibc.signal(signal) { number in
                if TerminalRestore.descriptor >= 0 {
                    tcsetattr(TerminalRestore.descriptor, TCSAFLUSH, &TerminalRestore.settings)
                }
                Glibc.signal(number, SIG_DFL)
                raise(number)
            }
        }
    }

    package func clear() {
        Self.descriptor = -1
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { Glibc.signal(signal, SIG_DFL) }
    }
}
