/// The program that provides the Secret Service on the session bus, as `doctor` and `status`
/// name it, with what portal-token knows of its ways (docs/storage.md, "Providers").
public enum SecretServiceProvider: Sendable, Equatable {
    case gnomeKeyring
    case keepassxc
    case kwallet
    case oo7
    /// Another program, by its executable's name ("" when it could not be seen, as from inside
    /// a sandbox).
    case other(String)

    /// The prompt `Service.Unlock` answers when it needs none: a locked collection is not always
    /// one that needs a password (a provider may know it already), so a client asks `Unlock`
    /// first, and this answer means the collection is unlocked, with nothing left to run.
    public static let noPrompt = "/"

    /// Who owns `org.freedesktop.secrets`, from its process: the executable's name, else the
    /// name of any program in its command line (a daemon started through a loader or an
    /// interpreter shows that as its executable).
    public init(executable: String, commandLine: [String]) {
        for candidate in [executable] + commandLine {
            if let known = Self.known(baseName(candidate)) {
                self = known
                return
            }
        }
        self = .other(baseName(executable))
    }

    private static func known(_ program: String) -> SecretServiceProvider? {
        switch program {
        case "gnome-keyring-daemon": .gnomeKeyring
        case "keepassxc", "KeePassXC": .keepassxc
        case "kwalletd5", "kwalletd6", "ksecretd": .kwallet
        case "oo7-daemon": .oo7
        default: nil
        }
    }

    /// Its name for people.
    public var name: String {
        switch self {
        case .gnomeKeyring: "gnome-keyring"
        case .keepassxc: "KeePassXC"
        case .kwallet: "KWallet"
        case .oo7: "oo7"
        case .other(let program): program.isEmpty ? "another provider" : "another provider (\(program))"
        }
    }

    /// What it does that a user meets through portal-token, and what portal-token does about it.
    public var quirks: String {
        switch self {
        case .gnomeKeyring:
            """
            unlocks the login keyring with the login password; a keyring locked later asks for it in its own \
            prompt, shown only when a person is at a terminal
            """
        case .keepassxc:
            """
            serves the database group exposed in its settings; while the database is locked, a search waits for \
            its unlock dialog ("Unlock before search"), which portal-token reports as locked at the bound; \
            "Confirm access" asks before each item is read; adds Title, UserName, URL, Notes, Uuid and Path \
            attributes, which portal-token ignores
            """
        case .kwallet:
            """
            answers a search in a closed wallet with its items locked; after login its wallet reads as locked \
            until a client runs the unlock it offers, which portal-token does only when a person is at a terminal
            """
        case .oo7:
            "answers a search in a locked collection with nothing, which portal-token reports as locked"
        case .other:
            "not one portal-token is tested with: an empty answer from a locked collection is reported as locked"
        }
    }
}

/// The last component of a path.
private func baseName(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? ""
}
