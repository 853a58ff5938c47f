/// The ports the commands reach the rest of the system through, beside `ItemStore`,
/// `HTTPTransport`, `HookLauncher` and `SecretCache`: the composition root fills them with the
/// adapters, a test with fakes (docs/development.md, "Modules and the dependency rule").

/// The D-Bus session bus as the commands ask it: whether a Secret Service provider is there,
/// and whether the default collection is locked. The bus daemon answers, never the keyring, so
/// a stalled keyring reads as present.
public protocol SessionBusConnection: AnyObject {
    func hasSecretServiceProvider() throws(StoreError) -> Bool
    func isDefaultCollectionLocked() throws(StoreError) -> Bool
    /// Sends the question `isDefaultCollectionLocked` asks now, without waiting: a run that will
    /// serve a cached session asks it beside `auto`'s question, so both cost one round trip.
    func askWhetherDefaultCollectionIsLocked()
    /// The bus's own unique ID (`org.freedesktop.DBus.GetId`), the same however its address is
    /// spelled: what names the keyring on it in the session cache.
    func busID() throws(StoreError) -> String
    /// The items of the Secret Service matching any of `filters`, with their secrets, newest
    /// first, read over this connection without libsecret (docs/storage.md, "Reading without
    /// libsecret"). nil when only libsecret can answer: the default collection or an item found
    /// is locked (an unlock may need a prompt), or the provider answered in a way this read does
    /// not handle. A provider that does not answer in time is an error.
    func unlockedSecretServiceItems(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem]?
    /// Which program owns `org.freedesktop.secrets` (the bus daemon names its process), or nil
    /// when none does.
    func secretServiceProvider() throws(StoreError) -> SecretServiceProvider?
    /// Asks the provider to unlock the default collection (`Service.Unlock`), within the bound,
    /// and never runs a prompt it answers with: true when it unlocked with no prompt (it answered
    /// the prompt `/`, `SecretServiceProvider.noPrompt`), false when a prompt is needed, there is
    /// no default collection, or it did not answer in time (docs/storage.md, "Providers").
    func unlockDefaultCollectionWithoutPrompt() throws(StoreError) -> Bool
    /// Unlocks the default collection with its password, where the provider takes one from a
    /// client (gnome-keyring does); never runs a prompt.
    func unlockDefaultCollection(password: Secret) throws(StoreError) -> PasswordUnlock
}

/// How unlocking the default collection with a password went.
public enum PasswordUnlock: Sendable, Equatable {
    case unlocked
    /// It was not locked; the password was not sent.
    case alreadyUnlocked
    case wrongPassword
    /// The provider takes no password from a client: only its own prompt unlocks it.
    case unsupported
    case noDefaultCollection
}

extension SessionBusConnection {
    /// A bus that cannot ask ahead asks when asked.
    public func askWhetherDefaultCollectionIsLocked() {}

    /// A bus that cannot ask unlocks nothing.
    public func unlockDefaultCollectionWithoutPrompt() throws(StoreError) -> Bool { false }

    /// Nor with a password.
    public func unlockDefaultCollection(password: Secret) throws(StoreError) -> PasswordUnlock { .unsupported }

    /// A bus that cannot say which program provides the Secret Service names none.
    public func secretServiceProvider() throws(StoreError) -> SecretServiceProvider? { nil }
}

/// What `doctor` asks the Secret Service through libsecret.
public protocol KeyringDiagnosis {
    /// Throws when no provider answers within the bound.
    func ping() throws(StoreError)
    func defaultCollection() throws(StoreError) -> (label: String, isLocked: Bool)
}

/// What a program run to completion left behind.
public struct ProgramResult: Sendable {
    /// The exit status, or nil when the program could not be started (`startError` says why).
    public var status: Int32?
    public var output: String
    public var startError: Int32

    public init(status: Int32?, output: String, startError: Int32 = 0) {
        self.status = status
        self.output = output
        self.startError = startError
    }
}

/// Starting other programs: git for `setup-git`, and the desktop's programs (the browser, a
/// notification). Each child gets the caller's environment, default signals and a process group
/// of its own.
public protocol ProgramLauncher {
    /// Runs `program` found on PATH with stdin from /dev/null and collects its stdout, within a
    /// bound; its stderr is the caller's.
    func run(_ program: String, _ arguments: [String], timeoutMilliseconds: Int) -> ProgramResult
    /// Starts `program` with /dev/null for its streams and gives it `waitMilliseconds` to finish:
    /// true when it finished with 0 or is still running, false when it failed or did not start.
    func start(_ program: String, _ arguments: [String], waitMilliseconds: Int) -> Bool
}
