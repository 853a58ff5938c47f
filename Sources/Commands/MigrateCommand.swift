import Basics
import Operations
import PortalTokenCore

struct MigrateCommand: Command {
    static let name = "migrate"
    static let isRefusedInClientMode = true
    static let summary = "Move every item from the other store into the named one"
    static let details = """
        One store is in use at a time, and lookups never mix two; status says when the
        other one also holds items (a file left from a time without a keyring, say).
        migrate copies each git credential, Portal session and waiting two-factor step
        into the store named by --to, from the store named by --from: by default the
        file for --to secret-service or --to vault, and the keyring for --to file
        (--from vault --to file moves a host off the Vault store). Where the destination
        already holds an item of the same slot at least as new (by the items'
        modification and creation times), the one already there is kept.

        Only once everything is written is the other store moved aside: the encrypted
        file is renamed to <file>.migrated-<UTC time> (it still opens with its
        passphrase); keyring and Vault items are deleted, the older copy of a slot the
        destination kept included, so one copy of each slot remains, the newest. The
        session copies cached in the kernel keyring are dropped.

        Then the store named by --to is the one in use: where the settings would choose
        another (auto picks the keyring while one is registered), backend = <store> is
        written to the config file, and migrate says so in one line. A --backend flag or
        PORTAL_TOKEN_BACKEND naming another store is left alone, with a warning. Prints
        what it did on stderr: how many items it moved, how many newer ones it kept, and
        where the other store went.

        When the store to move from holds nothing, migrate says so: exit 0. With
        --to secret-service and no Secret Service provider registered on the session bus
        it is exit 4, and so is migrate in client mode (PORTAL_TOKEN_AGENT_SOCK),
        refused naming the agent.
        """

    let destination: BackendChoice.Backend
    let source: BackendChoice.Backend

    init(arguments: ParsedArguments) throws(CLIError) {
        guard let to = arguments.value(.migrateTo) else {
            throw .usage(
                "'migrate' needs --to secret-service, --to file or --to vault",
                hint: "see 'portal-token migrate --help'")
        }
        let names = BackendChoice.Backend.allCases.map(\.rawValue)
        guard let destination = BackendChoice.Backend(rawValue: to) else {
            throw .usage("--to must be secret-service, file or vault", hint: Context.backendHint(for: to, among: names))
        }
        var source = destination.other
        if let from = arguments.value(.migrateFrom) {
            guard let named = BackendChoice.Backend(rawValue: from) else {
                throw .usage(
                    "--from must be secret-service, file or vault", hint: Context.backendHint(for: from, among: names))
            }
            source = named
        }
        guard source != destination else { throw .usage("--from and --to name the same store") }
        self.destination = destination
        self.source = source
    }

    func run(in context: Context) throws {
        let streams = context.streams
        switch try Migrate.run(from: source, to: destination, context) {
        case .nothingStored(let description):
            streams.printError("portal-token: nothing to migrate: \(description) holds nothing")
        case .moved(let moved, let kept, let aside):
            streams.printError(
                "portal-token: moved \(moved) item\(moved == 1 ? "" : "s") to the \(destination.rawValue) store"
                    + (kept > 0 ? " (kept \(kept) newer one\(kept == 1 ? "" : "s") already there)" : "") + "; \(aside)")
            if let line = try context.makeDefault(destination) { streams.printError("portal-token: \(line)") }
        }
    }
}
