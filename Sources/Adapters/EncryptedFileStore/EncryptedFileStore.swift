import Basics
import Glibc
import KernelKeyring
import PortalTokenCore

/// portal-token's items in one file encrypted with XChaCha20-Poly1305 under a key Argon2id
/// derives from a passphrase (docs/file-format.md).
///
/// - Reads need no lock: the file is only ever replaced by rename, so a reader sees a whole old
///   or a whole new file. Writes take `<file>.lock` (`StoreFileLock`, which the caller may
///   already hold), re-read, change, and replace the file.
/// - Key derivation happens outside the lock, so 64 processes starting at once do not queue
///   behind each other's Argon2id.
/// - The passphrase is asked for only when no cached key opens the file, and, when the TPM sealed
///   the key (`sealTo`), only when the TPM does not unseal it: the passphrase is then the
///   recovery route.
/// - What one process read is read again only when the file changed: every write replaces the
///   file by rename, so a file whose inode, size and times are unchanged holds the same bytes.
public final class EncryptedFileStore {
    public let path: String
    private let files: StoreFileSystem
    private let keyCache: KeyCache
    private let lock: any SessionLock
    private let kdfParameters: KDFParameters
    private let passphraseSource: (PassphrasePurpose) throws(StoreError) -> Passphrase
    private let warn: (String) -> Void
    private let created: () -> Void
    private let keySealer: (any KeySealer)?
    /// The PCRs each write seals the key to; nil: writes do not seal it.
    private let sealTo: [Int]?
    /// Whether a passphrase opens the file too (`file-tpm-recovery`); without one, a sealed file's
    /// key is random and only the TPM opens it.
    private let passphraseRecovery: Bool
    /// The sealed copy of a key known to this process: the one the file carries, or the one
    /// it sealed; a write with the same key and PCRs keeps it, with no TPM command.
    private var sealedCopy: (identity: KeyIdentity, sealed: SealedKey)?
    /// A sealed copy the TPM would not unseal: the next write seals the key again.
    private var refusedSeal: SealedKey?

    /// The file as this process last read or wrote it.
    private var lastContents: StoreFileSystem.Contents?
    /// The key that opened the file last, so one process derives at most once per header.
    private var unlocked: UnlockedKey?
    /// The passphrase, kept only while this store lives, for raising the KDF parameters of a
    /// file opened with a cached key.
    private var passphrase: Passphrase?
    /// The key identities the passphrase in hand is known to open: it opened or created them.
    private var passphraseOpens: [KeyIdentity] = []

    /// - Parameters:
    ///   - path: the store file; its directory is created 0700 when missing.
    ///   - keyCacheTimeoutSeconds: how long a derived key stays in the kernel keyring
    ///     unused (each use starts it again); 0 turns the cache off.
    ///   - keyCacheMaximumSeconds: the longest it stays there, however often it is used.
    ///   - lock: the file's lock, which the caller may hold around a whole change; by default
    ///     one of the store's own that waits 3 s for another process's write.
    ///   - kdfParameters: the Argon2id cost new files get, and older files are raised to.
    ///   - passphrase: asked only when a key must be derived; throws when there is none.
    ///   - warn: receives one line for each damaged file moved aside.
    ///   - created: called after the write that created the file, so that the fallback
    ///     to the file is announced by that write alone (docs/storage.md, "The encrypted file").
    ///   - keyCache: where derived keys are kept between runs: the kernel keyring, or an
    ///     agent's memory.
    ///   - keySealer: the TPM, which unseals a key the file carries sealed.
    ///   - sealTo: the PCRs every write seals the key to (none: bound to the TPM alone); nil
    ///     writes no sealed key.
    ///   - passphraseRecovery: false makes a sealed file's key random, so that no passphrase
    ///     opens it (`file-tpm-recovery = none`).
    public init(
        path: String, keyCacheTimeoutSeconds: Int = 900, keyCacheMaximumSeconds: Int = 7200,
        lock: (any SessionLock)? = nil,
        kdfParameters: KDFParameters = .recommended,
        passphrase: @escaping (PassphrasePurpose) throws(StoreError) -> Passphrase,
        warn: @escaping (String) -> Void, created: @escaping () -> Void = {},
        keyCache cache: any SecretCache = KernelKeyring(),
        keySealer: (any KeySealer)? = nil, sealTo: [Int]? = nil, passphraseRecovery: Bool = true
    ) {
        self.keySealer = keySealer
        self.sealTo = sealTo
        self.passphraseRecovery = passphraseRecovery
        self.created = created
        precondition(Sodium.ready, "libsodium could not be initialised")
        self.path = path
        files = StoreFileSystem(path: path)
        keyCache = KeyCache(
            timeoutSeconds: keyCacheTimeoutSeconds, maximumSeconds: keyCacheMaximumSeconds, cache: cache)
        self.lock = lock ?? StoreFileLock(path: path, timeoutMilliseconds: 3000)
        self.kdfParameters = kdfParameters
        passphraseSource = passphrase
        self.warn = warn
    }

    /// Whether a store file is there (of any state): with the keyring in use, `status` says the
    /// file also holds items, and `migrate` has something to merge, only then.
    public static func exists(at path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// What opens the store file at `path`, read from its header alone; nil when there is no
    /// readable store file there.
    public static func keyProtection(at path: String) -> FileKeyProtection? {
        guard let contents = try? StoreFileSystem(path: path).read(), contents.damage == nil,
            let (header, _) = try? StoreFileFormat.parse(contents.bytes)
        else { return nil }
        return protection(sealed: header.sealed, kdf: header.kdf)
    }

    /// What opens a file that carries `sealed` and whose key `kdf` derives.
    private static func protection(sealed: SealedKey?, kdf: KDFParameters) -> FileKeyProtection {
        sealed.map { .tpm(pcrs: $0.pcrs, recovery: kdf != .none) } ?? .passphrase
    }

    /// Renames the store file at `path` to `<name>.migrated-<UTC time>` under its lock, once
    /// `migrate` has written everything it held to the other store, and returns the new path.
    /// Nothing is deleted: the old file stays readable with its passphrase.
    public static func moveAsideAfterMigration(path: String, lock: any SessionLock) throws(StoreError) -> String {
        try lock.withStoreLock { () throws(StoreError) in try StoreFileSystem(path: path).moveAside(as: "migrated") }
    }

    // MARK: Reading

    func read() throws(StoreError) -> StorePayload {
        for _ in 0..<3 {
            guard let contents = try readFile() else { return .empty }
            switch try open(contents) {
            case .payload(let payload, _): return payload
            case .damaged(let reason):
                try lock.withStoreLock { () throws(StoreError) in try moveAsideIfUnchanged(contents, reason: reason) }
            }
        }
        throw raceError()
    }

    /// The file, read again only when it is not the one this process last read or wrote.
    private func readFile() throws(StoreError) -> StoreFileSystem.Contents? {
        if let lastContents, try files.identity() == lastContents.identity { return lastContents }
        lastContents = try files.read()
        return lastContents
    }

    private enum Opened {
        case payload(StorePayload, UnlockedKey)
        case damaged(String)
    }

    /// Decrypts a file's contents, deriving or fetching the key as needed.
    private func open(_ contents: StoreFileSystem.Contents) throws(StoreError) -> Opened {
        if let damage = contents.damage { return .damaged(damage) }
        let header: StoreFileHeader, ciphertext: ArraySlice<UInt8>
        do {
            (header, ciphertext) = try StoreFileFormat.parse(contents.bytes)
        } catch {
            switch error {
            case .damaged(let reason): return .damaged(reason)
            case .newerVersion(let version):
                throw StoreError(
                    .failed,
                    """
                    the store file \(path) was written in format version \(version), newer than this portal-token \
                    reads
                    """,
                    hint: "upgrade portal-token; the file was left as it is")
            case .unsupportedKDF(let what):
                throw StoreError(
                    .failed, "the store file \(path) asks for \(what), which this portal-token does not accept",
                    hint: "upgrade portal-token; the file was left as it is")
            }
        }
        let key = try key(for: header)
        guard
            var plaintext = Sodium.open(
                ciphertext, associatedData: header.bytes, nonce: header.nonce,
                key: key.encryptionKey)
        else {
            return .damaged("its contents failed authentication")
        }
        defer { zeroize(&plaintext) }
        do {
            return .payload(try StorePayload(decoding: plaintext), key)
        } catch {
            return .damaged("its decrypted contents are not valid JSON at byte \(error.offset)")
        }
    }

    /// The key that opens `header`: the one already in hand, a cached one, or a new derivation.
    private func key(for header: StoreFileHeader) throws(StoreError) -> UnlockedKey {
        if let sealed = header.sealed, sealed != refusedSeal { sealedCopy = (header.keyIdentity, sealed) }
        if let unlocked, unlocked.opens(header) { return unlocked }
        let description = KeyCache.description(path: canonicalPath, identity: header.keyIdentity)
        if let cached = keyCache.read(description) {
            let key = UnlockedKey(identity: header.keyIdentity, derivedKey: cached)
            if key.opens(header) {
                unlocked = key
                return key
            }
            keyCache.drop(description)
        }
        var unsealFailure: SealError?
        if let sealed = header.sealed {
            switch unseal(sealed, header) {
            case .success(let key):
                keyCache.store(key.derivedKey, as: description)
                unlocked = key
                return key
            case .failure(let failure):
                unsealFailure = failure
                refusedSeal = sealed
                sealedCopy = nil
                guard header.kdf != .none else {
                    throw StoreError(
                        .locked,
                        notUnsealed(failure) + "; the file has no recovery passphrase, so only the TPM that sealed it "
                            + "opens it",
                        hint: (failure.hint.map { $0 + "; " } ?? "") + "the file was left as it is")
                }
            }
        }
        // A person at the terminal is asked again after a typo, up to `typedAttempts` times.
        var attempt = 1
        var key: UnlockedKey
        while true {
            let passphrase: Passphrase
            do {
                passphrase = try self.passphrase(for: attempt == 1 ? .unlock : .unlockAgain)
            } catch {
                guard let unsealFailure else { throw error }
                throw StoreError(
                    .locked, notUnsealed(unsealFailure),
                    hint: (unsealFailure.hint.map { $0 + "; or " } ?? "")
                        + "open it with its recovery passphrase: \(error.hint ?? error.message); the file was left "
                        + "as it is")
            }
            key = try derive(passphrase, identity: header.keyIdentity)
            if key.opens(header) { break }
            forgetPassphrase()
            guard passphrase.isTyped, attempt < Passphrase.typedAttempts else {
                throw StoreError(
                    .locked, "wrong passphrase for the store file \(path)",
                    hint: passphrase.isTyped
                        ? "\(attempt) wrong passphrases were typed; the file was left as it is"
                        : "check the passphrase in \(passphrase.origin); the file was left as it is")
            }
            attempt += 1
        }
        keyCache.store(key.derivedKey, as: description)
        unlocked = key
        passphraseOpens.append(key.identity)
        if let unsealFailure {
            warn(
                notUnsealed(unsealFailure) + "; it was opened with its recovery passphrase"
                    + (sealTo == nil ? "" : ", and the next write seals it again"))
        }
        return key
    }

    private func notUnsealed(_ failure: SealError) -> String {
        "the TPM did not unseal the key of the store file \(path): \(failure.message)"
    }

    /// The key the TPM unseals from `sealed`, if it opens the file.
    private func unseal(_ sealed: SealedKey, _ header: StoreFileHeader) -> Result<UnlockedKey, SealError> {
        guard let keySealer else { return .failure(SealError(.unavailable, "this build has no TPM support")) }
        do throws(SealError) {
            let key = UnlockedKey(
                identity: header.keyIdentity, derivedKey: try keySealer.unseal(sealed.object, pcrs: sealed.pcrs))
            guard key.opens(header) else {
                return .failure(SealError(.refused, "the key it unsealed does not open the file"))
            }
            return .success(key)
        } catch {
            return .failure(error)
        }
    }

    /// The sealed copy a write of `key` carries: the one known for it when it is sealed to the
    /// PCRs wanted, else a new one; nil when writes do not seal.
    private func sealedCopy(of key: UnlockedKey) throws(StoreError) -> SealedKey? {
        guard let sealTo else { return nil }
        if let sealedCopy, sealedCopy.identity == key.identity, sealedCopy.sealed.pcrs == sealTo {
            return sealedCopy.sealed
        }
        guard let keySealer else {
            throw StoreError(.unavailable, "this build cannot seal the store file's key: it has no TPM support")
        }
        do throws(SealError) {
            let sealed = SealedKey(pcrs: sealTo, object: try keySealer.seal(key.derivedKey, pcrs: sealTo))
            sealedCopy = (key.identity, sealed)
            return sealed
        } catch {
            throw nothingWritten(error, "the TPM did not seal the key of the store file \(path): \(error.message)")
        }
    }

    /// A TPM failure on the way to a write, which wrote nothing.
    private func nothingWritten(_ error: SealError, _ message: String) -> StoreError {
        StoreError(
            error.kind == .timedOut ? .timedOut : .unavailable, message,
            hint: (error.hint.map { $0 + "; " } ?? "") + "nothing was written")
    }

    private func passphrase(for purpose: PassphrasePurpose) throws(StoreError) -> Passphrase {
        if let passphrase { return passphrase }
        let given = try nonEmpty(passphraseSource(purpose))
        passphrase = given
        return given
    }

    /// Refuses an empty passphrase, which would not protect the store.
    private func nonEmpty(_ given: Passphrase) throws(StoreError) -> Passphrase {
        guard !given.secret.isEmpty else {
            throw StoreError(
                .locked, "the passphrase from \(given.origin) is empty",
                hint: "an empty passphrase would not protect the store; set a real one")
        }
        return given
    }

    private func derive(_ passphrase: Passphrase, identity: KeyIdentity) throws(StoreError) -> UnlockedKey {
        guard
            let derived = identity.kdf.derive(passphrase.secret, salt: identity.salt)
        else {
            throw StoreError(
                .failed,
                """
                deriving the key for the store file \(path) failed (Argon2id needs \(identity.kdf.memLimit >> 20) \
                MiB of memory)
                """,
                hint: "free some memory and try again")
        }
        return UnlockedKey(identity: identity, derivedKey: derived)
    }

    /// The path the key cache names: the same file reached by two spellings shares its key.
    private lazy var canonicalPath: String = CanonicalPath.of(path)

    // MARK: Writing

    /// Read-modify-write under the lock. `change` returns whether it changed anything; the file
    /// is written only then.
    func modify(_ change: (inout StorePayload) -> Bool) throws(StoreError) {
        for _ in 0..<4 {
            // Unlock (maybe deriving) before taking the lock, so writers do not queue behind each
            // other's Argon2id; under the lock, check that the file still has the same key.
            let seen = try readFile()
            var key: UnlockedKey?
            if let seen {
                switch try open(seen) {
                case .payload(_, let opened):
                    key = opened
                case .damaged(let reason):
                    try lock.withStoreLock { () throws(StoreError) in try moveAsideIfUnchanged(seen, reason: reason) }
                    continue
                }
            }
            let done = try lock.withStoreLock { () throws(StoreError) -> Bool in
                let current = try readFile()
                // Another process created or re-keyed the file meanwhile: start over on what it wrote.
                guard keyIdentity(of: current) == keyIdentity(of: seen) else { return false }
                var payload = StorePayload.empty
                if let current {
                    switch try open(current) {
                    case .payload(let opened, _): payload = opened
                    case .damaged(let reason):
                        try moveAsideIfUnchanged(current, reason: reason)
                        return false
                    }
                }
                // A file of an earlier layout is rewritten as items by the first write of any kind.
                guard change(&payload) || payload.isUpgraded else { return true }
                files.removeAbandonedTemporaryFiles()
                // A new file is keyed under the lock: it happens once, and a second process must
                // not create a file of its own beside it.
                let fileKey: UnlockedKey
                if let key { fileKey = key } else { fileKey = try newKey() }
                try write(payload, key: try strengthened(fileKey))
                if current == nil { created() }
                return true
            }
            if done { return }
        }
        throw raceError()
    }

    /// Writes the file again now, by rename, with its key as this store is configured to keep it
    /// (sealed or not, to which PCRs, with or without a recovery passphrase), rather than at its
    /// next change; with `newPassphrase`, asked once the file is open, under a key that
    /// passphrase derives with a new salt, so the old one no longer opens it. As every write, it
    /// opens the file and makes the new key (prompts, Argon2id, the TPM) outside the lock, and
    /// under it writes only if the file still has the key it was opened with. Returns what
    /// opens the file written; nil when there is no file.
    public func rekey(newPassphrase: (() throws(StoreError) -> Passphrase)?) throws(StoreError)
        -> FileKeyProtection?
    {
        guard let seen = try readFile() else { return nil }
        if newPassphrase != nil, wantsNoPassphrase {
            throw StoreError(
                .failed, "the store file \(path) is to be opened by the TPM alone (file-tpm-recovery = none)",
                hint: "a passphrase cannot be set for it; set file-tpm-recovery = passphrase to keep one")
        }
        let key: UnlockedKey
        switch try open(seen) {
        case .damaged(let reason): throw unreadable(reason)
        case .payload(_, let opened): key = opened
        }
        let next: UnlockedKey
        if let newPassphrase {
            let given = try nonEmpty(newPassphrase())
            (passphrase, passphraseOpens) = (given, [])
            next = try freshKey(given, kdf: kdfParameters.raised(to: key.identity.kdf))
        } else if key.identity.kdf == .none, !wantsNoPassphrase {
            throw StoreError(
                .locked,
                "the store file \(path) is opened by the TPM alone, and the settings (file-tpm, file-tpm-recovery) "
                    + "ask for a passphrase to open it too",
                hint: "give it one with 'portal-token file-key --new-passphrase' (or --new-passphrase-file FILE); "
                    + "nothing was changed")
        } else {
            next = try strengthened(key)
        }
        // Sealed again now, whatever the file carries: the key cache may have opened a file whose
        // sealed copy is bound to PCR values that have changed since, and writing that copy back
        // would leave a file the TPM no longer opens. The new copy is unsealed once before it is
        // written.
        sealedCopy = nil
        let sealed = try sealedCopy(of: next)
        if let sealed { try checkUnseals(sealed, next) }
        return try lock.withStoreLock { () throws(StoreError) -> FileKeyProtection? in
            guard let current = try readFile(), keyIdentity(of: current) == key.identity else {
                throw StoreError(
                    .timedOut, "the store file \(path) was re-keyed or removed by another process meanwhile",
                    hint: "run portal-token file-key again; nothing was changed")
            }
            let payload: StorePayload
            switch try open(current) {
            case .damaged(let reason): throw unreadable(reason)
            case .payload(let opened, _): payload = opened
            }
            files.removeAbandonedTemporaryFiles()
            // Opening took the file's own sealed copy again; the write carries the new one.
            if let sealed { sealedCopy = (next.identity, sealed) }
            try write(payload, key: next)
            if next.identity != key.identity {
                keyCache.drop(KeyCache.description(path: canonicalPath, identity: key.identity))
            }
            return Self.protection(sealed: sealed, kdf: next.identity.kdf)
        }
    }

    private func unreadable(_ reason: String) -> StoreError {
        StoreError(
            .failed, "the store file \(path) could not be read (\(reason))",
            hint: "it was left as it is; the next read moves it aside")
    }

    /// Fails unless the TPM unseals `sealed` to `key`: a file keyed for the TPM alone would
    /// otherwise be lost by a seal that went wrong.
    private func checkUnseals(_ sealed: SealedKey, _ key: UnlockedKey) throws(StoreError) {
        guard let keySealer else { return }
        let unsealed: Secret
        do throws(SealError) {
            unsealed = try keySealer.unseal(sealed.object, pcrs: sealed.pcrs)
        } catch {
            throw nothingWritten(error, notUnsealed(error) + " after sealing it")
        }
        let check = UnlockedKey(identity: key.identity, derivedKey: unsealed)
        guard Sodium.equal(check.keyCheck, key.keyCheck) else {
            throw StoreError(
                .failed, "the TPM unsealed another key than it sealed for the store file \(path)",
                hint: "nothing was written")
        }
    }

    private func keyIdentity(of contents: StoreFileSystem.Contents?) -> KeyIdentity? {
        contents.flatMap { try? StoreFileFormat.parse($0.bytes).0.keyIdentity }
    }

    /// A fresh salt and the current parameters, for a file that does not exist yet; a random key
    /// when the file is to be sealed with no recovery passphrase.
    private func newKey() throws(StoreError) -> UnlockedKey {
        if wantsNoPassphrase { return randomKey() }
        return try freshKey(try passphrase(for: .create), kdf: kdfParameters)
    }

    /// Whether writes key the file for the TPM alone.
    private var wantsNoPassphrase: Bool { sealTo != nil && !passphraseRecovery }

    /// A random key under a new salt, which no passphrase derives.
    private func randomKey() -> UnlockedKey {
        UnlockedKey(
            identity: KeyIdentity(
                formatVersion: StoreFileFormat.keyVersion, kdf: .none, salt: Sodium.randomBytes(Sodium.saltLength)),
            derivedKey: Secret(bytes: Sodium.randomBytes(Sodium.keyLength)))
    }

    /// A key under a new salt, the current format and `kdf`, which the passphrase in hand opens.
    private func freshKey(_ passphrase: Passphrase, kdf: KDFParameters) throws(StoreError) -> UnlockedKey {
        let identity = KeyIdentity(
            formatVersion: StoreFileFormat.keyVersion, kdf: kdf, salt: Sodium.randomBytes(Sodium.saltLength))
        let key = try derive(passphrase, identity: identity)
        passphraseOpens.append(identity)
        return key
    }

    /// A passphrase that failed to open a file is of no further use, and must never key one.
    private func forgetPassphrase() {
        passphrase = nil
        passphraseOpens = []
    }

    /// The key to write with: a new salt under this build's parameters when they are stronger
    /// than the file's (or the format is older), provided the passphrase can be had and is the
    /// one that opened the file. Otherwise the file's own key: a write never fails for want of
    /// a passphrase it did not need.
    private func strengthened(_ key: UnlockedKey) throws(StoreError) -> UnlockedKey {
        // A change of recovery: the TPM alone wanted, or a passphrase again (which must be had,
        // since a file no longer sealed and keyed by no passphrase would open for no one).
        if wantsNoPassphrase { return key.identity.kdf == .none ? key : randomKey() }
        if key.identity.kdf == .none {
            guard let passphrase = try? passphrase(for: .change) else {
                guard sealTo != nil else {
                    throw StoreError(
                        .locked,
                        "the store file \(path) is opened by the TPM alone, and writing it without the TPM needs a "
                            + "passphrase for it",
                        hint: "give it a passphrase (PORTAL_TOKEN_PASSPHRASE_FILE, or the terminal), or keep file-tpm "
                            + "on; nothing was written")
                }
                return key
            }
            return try freshKey(passphrase, kdf: kdfParameters)
        }
        let wanted = key.identity.kdf.raised(to: kdfParameters)
        guard wanted != key.identity.kdf || key.identity.formatVersion != StoreFileFormat.keyVersion,
            let passphrase = try? passphrase(for: .unlock)
        else { return key }
        if !passphraseOpens.contains(key.identity) {
            // A passphrase not yet checked against this file (the key came from the cache) must
            // match, or the re-keyed file would open under a passphrase the user never chose.
            guard let check = try? derive(passphrase, identity: key.identity),
                Sodium.equal(check.keyCheck, key.keyCheck)
            else {
                forgetPassphrase()
                return key
            }
            passphraseOpens.append(key.identity)
        }
        return try freshKey(passphrase, kdf: wanted)
    }

    private func write(_ payload: StorePayload, key: UnlockedKey) throws(StoreError) {
        var plaintext = payload.encoded()
        defer { zeroize(&plaintext) }
        let sealed = StoreFileFormat.seal(
            plaintext, kdf: key.identity.kdf, salt: key.identity.salt, key: key, sealed: try sealedCopy(of: key))
        try files.replace(with: sealed)
        // Written under the lock, so the file there now is this one; nothing after the rename
        // may fail (without its identity, the next read reads the file again).
        lastContents = (try? files.identity()).map { StoreFileSystem.Contents(bytes: sealed, identity: $0) }
        if key.identity != unlocked?.identity {
            keyCache.store(key.derivedKey, as: KeyCache.description(path: canonicalPath, identity: key.identity))
        }
        unlocked = key
    }

    private func moveAsideIfUnchanged(_ seen: StoreFileSystem.Contents, reason: String) throws(StoreError) {
        // Another process may have moved it aside, or replaced it with a good file, meanwhile.
        guard try files.read() == seen else { return }
        let aside = try files.moveAside()
        warn(
            """
            the store file \(path) could not be read (\(reason)); moved it aside to \(aside) and started an empty \
            store
            """
        )
    }

    private func raceError() -> StoreError {
        StoreError(
            .timedOut, "the store file \(path) kept changing while portal-token read it",
            hint: "another process is rewriting it; try again")
    }
}
