import Operations
import PortalTokenCore

struct LockCommand: Command {
    static let name = "lock"
    static let summary = "Drop every cached key and session copy at once, the agent's too"
    static let details = """
        Drops every entry portal-token keeps in the kernel keyring (the user's
        persistent keyring, named portal-token:…): the encrypted file store's cached
        keys, the Portal session's copies and sign-in results kept in memory, for every
        store and environment of this user. Afterwards this lists none:

          keyctl session - sh -c 'keyctl show $(keyctl get_persistent @s)'

        A running agent drops the ones it keeps too: in client mode
        (PORTAL_TOKEN_AGENT_SOCK) only the agent's, judged as a store or erase is (so
        the agent's restricted socket refuses it); else the agent listening on
        $XDG_RUNTIME_DIR/portal-token/agent.sock, if its socket is there (one that does
        not answer within 2 seconds is passed over).

        Nothing stored is changed: the next command reads the store again, so the
        encrypted file asks for its passphrase. It does not lock the desktop keyring;
        lock that with the desktop (or the screen lock). The caches also empty
        themselves: key-cache-timeout seconds after their last use, key-cache-max
        seconds at most.
        """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        switch try Lock.run(context) {
        case .agent(let socketPath):
            context.streams.printError(
                "portal-token: the agent at \(socketPath) dropped every cached key and session copy it kept; "
                    + "its next request reads the store again")
        case .here(let agentToo):
            context.streams.printError(
                "portal-token: dropped every cached key and session copy\(agentToo ? ", the agent's too" : ""); "
                    + "the next command reads the store again")
        }
    }
}

/// `portal-token unlock`: the keyring's password typed at the terminal, for a session with no
/// desktop to show the keyring's own dialog (docs/storage.md, "Unlocking from a terminal").
struct UnlockCommand: Command {
    static let name = "unlock"
    static let isRefusedInClientMode = true
    static let summary = "Unlock the keyring (or open the encrypted file) from this terminal"
    static let details = """
        For a session with no desktop to show the keyring's own dialog, over ssh say.
        With the Secret Service in use, asks for the default keyring's password on the
        terminal (echo off) and gives it to the keyring, which checks it; a wrong
        password is asked again, three tries in all. gnome-keyring takes a password this
        way; KWallet and KeePassXC unlock only in their own window, and unlock says so
        (exit 4).

        With the encrypted file in use, opens it: the passphrase comes from its source,
        else the terminal, and the key is kept for later commands (key-cache-timeout),
        as any read keeps it. A file that does not exist yet: says so, exit 0.

        Already unlocked: says so, exit 0. Asking needs a terminal where prompts are
        allowed (GIT_TERMINAL_PROMPT=0 and credential.interactive rule them out):
        otherwise a locked keyring is exit 4, with nothing asked. In client mode
        (PORTAL_TOKEN_AGENT_SOCK) unlock is refused naming the agent, exit 4.
        """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let backend = try context.backendChoice().backend
        guard backend == .secretService else {
            guard try context.storeExists(backend) else {
                return context.streams.printError(
                    "portal-token: nothing to unlock: \(try context.storeDescription(backend)) holds nothing yet")
            }
            // A read opens the store: the passphrase is asked only where its source is the
            // terminal, and the key is kept as any read keeps it.
            _ = try context.items(backend).search(ItemMigration.everything)
            return context.streams.printError("portal-token: \(try context.storeDescription(backend)) is open")
        }
        guard let bus = try context.sessionBus() else {
            throw StoreError(.unavailable, "there is no D-Bus session bus, so no keyring to unlock")
        }
        guard try bus.isDefaultCollectionLocked() else {
            return context.streams.printError("portal-token: the default keyring is already unlocked")
        }
        let provider = context.secretServiceProvider()
        if let provider, [.kwallet, .keepassxc].contains(provider) {
            throw Self.onlyItsOwnWindow(provider.name)
        }
        switch context.promptPermission() {
        case .allowed: break
        case .ruledOut(let setting):
            throw StoreError(.locked, "the default keyring is locked, and \(setting) rules out asking for its password")
        case .noTerminal:
            throw StoreError(
                .locked, "the default keyring is locked, and there is no terminal to ask its password on",
                hint: "run 'portal-token unlock' in a terminal")
        }
        guard let terminal = TerminalPrompt() else {
            throw StoreError(.locked, "the default keyring is locked, and the terminal cannot be opened to ask")
        }
        defer { terminal.close() }
        for attempt in 1...Passphrase.typedAttempts {
            if attempt > 1 { terminal.say("Wrong password; try again.\n") }
            let password = terminal.read(prompt: "Password for the default keyring: ")
            guard !password.isEmpty else {
                throw StoreError(.locked, "no password was typed; the keyring stays locked")
            }
            switch try bus.unlockDefaultCollection(password: password) {
            case .unlocked:
                return context.streams.printError("portal-token: unlocked the default keyring")
            case .alreadyUnlocked:
                return context.streams.printError("portal-token: the default keyring is already unlocked")
            case .wrongPassword:
                continue
            case .unsupported:
                throw Self.onlyItsOwnWindow(provider?.name ?? "the keyring")
            case .noDefaultCollection:
                throw StoreError(
                    .unavailable, "the keyring has no default collection to unlock",
                    hint: "create one in the keyring's own tool, or use --backend file")
            }
        }
        throw StoreError(
            .locked, "\(Passphrase.typedAttempts) wrong passwords were typed; the default keyring stays locked")
    }

    private static func onlyItsOwnWindow(_ name: String) -> StoreError {
        StoreError(
            .locked, "\(name) takes no password from a terminal: it unlocks only in its own window",
            hint: "unlock it in the desktop session, or use the encrypted file (--backend file) on this machine")
    }
}
