import PortalTokenCore

struct LockCommand: Command {
    static let name = "lock"
    static let summary = "Drop every cached key and session copy from the kernel keyring at once"
    static let details = """
        Drops every entry portal-token keeps in the kernel user keyring (keyctl show @u lists
        them as portal-token:…): the encrypted file store's cached keys, the Portal session's
        copies and sign-in results kept in memory, for every store and environment of this
        user. Nothing stored is changed: the next command reads the store again, so the
        encrypted file asks for its passphrase. It does not lock the desktop keyring; lock that
        with the desktop (or the screen lock). The caches also empty themselves:
        key-cache-timeout seconds after their last use, key-cache-max seconds at most.
        """

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        context.services.secretCache().dropAll(withPrefix: SecretCacheNames.prefix)
        context.streams.printError(
            "portal-token: dropped every cached key and session copy; the next command reads the store again")
    }
}
