@testable import EncryptedFileStore
import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("encrypted file store: the store contract")
struct EncryptedFileStoreContractTests {
    @Test("the file keeps the item-store contract", arguments: ItemStoreContract.checks)
    func items(check: ItemStoreContractCheck) throws {
        let directory = try TemporaryDirectory()
        let path = directory.storePath
        try check.run(
            on: ContractStore(makeStore(path, kdf: cheapKDF), another: { makeStore(path, kdf: cheapKDF) }) {
                // Locked: the file as a process sees it that has no key cached and no passphrase.
                (makeStore(path, passphrase: nil, kdf: cheapKDF), {})
            })
    }

    @Test("git credentials keep their contract in the file", arguments: CredentialContract.checks)
    func contract(check: CredentialContractCheck) throws {
        let directory = try TemporaryDirectory()
        try check.run(on: makeStore(directory.storePath))
    }

    @Test("the file keeps the session and two-factor step contract", arguments: RecordContract.checks)
    func recordContract(check: RecordContractCheck) throws {
        let directory = try TemporaryDirectory()
        try check.run(on: makeStore(directory.storePath, kdf: cheapKDF))
    }

    @Test("what one store wrote, a store opened afterwards reads unchanged")
    func reopens() throws {
        let directory = try TemporaryDirectory()
        let first = makeStore(directory.storePath)
        try first.store(credential(user: "alice", password: "one", refreshToken: "refresh"))
        try first.store(credential(user: "bob", password: "two"))
        let second = makeStore(directory.storePath)
        let found = try second.lookup(query())
        #expect(found.map(\.username) == ["bob", "alice"])
        #expect(found[1] == credential(user: "alice", password: "one", refreshToken: "refresh"))
    }
}

@Suite("encrypted file store: the file on disk")
struct EncryptedFileFormatTests {
    @Test("the file starts with the magic, format version 1, Argon2id and its parameters")
    func header() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        let bytes = try fileBytes(directory.storePath)
        #expect(Array(bytes[0..<8]) == Array("PTSTORE\0".utf8))
        #expect(Array(bytes[8..<11]) == [0, 1, 2])
        let (header, _) = try StoreFileFormat.parse(bytes)
        #expect(header.kdf == KDFParameters.recommended)
        #expect(header.kdf.memLimit >= 64 << 20)
    }

    @Test("no stored username, password, refresh token or record appears in clear")
    func nothingInClear() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath)
        try store.store(
            credential(
                "git.example.org", user: "clear-user-name", password: "clear-pass-word",
                refreshToken: "clear-refresh-token"))
        try store.replace(
            [],
            with: StoredItem(
                attributes: [StoredItem.schemaAttribute: SessionItems.schema, "auth-environment-id": "session"],
                label: "clear-label-text", secret: Secret("clear-record-text")))
        let bytes = try fileBytes(directory.storePath)
        for text in [
            "clear-user-name", "clear-pass-word", "clear-refresh-token", "clear-record-text", "clear-label-text",
            "git.example.org", "https", "session", "correct horse",
        ] {
            #expect(!bytes.contains(text), "\(text) is in the file")
        }
    }

    @Test("the file is created 0600 in a directory created 0700")
    func permissions() throws {
        let directory = try TemporaryDirectory()
        let previous = umask(0o022)
        defer { umask(previous) }
        try makeStore(directory.storePath).store(credential())
        #expect(try mode(of: directory.storePath) == 0o600)
        #expect(try mode(of: directory.path + "/data/portal-token") == 0o700)
        #expect(try mode(of: directory.path + "/data") == 0o700)
        #expect(try siblings(of: directory.storePath) == ["store", "store.lock"])
    }

    @Test("every write uses a fresh nonce, so the same entries never encrypt alike")
    func freshNonce() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath)
        try store.store(credential())
        let first = try fileBytes(directory.storePath)
        try store.store(credential())
        let second = try fileBytes(directory.storePath)
        #expect(first[27..<43] == second[27..<43], "the salt stays")
        #expect(first[43..<67] != second[43..<67], "the nonce changes")
    }

    @Test("a file written in format version 1 stays readable", .tags(.compatibility))
    func readsVersion1Fixture() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(
            atPath: directory.path + "/data/portal-token", withIntermediateDirectories: true)
        try writeFile(directory.storePath, version1Fixture)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.storePath)
        let store = makeStore(directory.storePath, passphrase: "fixture passphrase", kdf: cheapKDF)
        let found = try store.lookup(
            CredentialQuery(protocolName: "https", host: CredentialHost(server: "fixture.example", port: 8443)))
        #expect(
            found == [
                Credential(
                    protocolName: "https", host: CredentialHost(server: "fixture.example", port: 8443),
                    path: "repo.git", username: "fixture-user", password: Secret("fixture-password"),
                    passwordExpiresAt: 4_102_444_800, oauthRefreshToken: Secret("fixture-refresh"))
            ])
        // A record of a name no build knows is kept, as an item of its own schema.
        let records = try store.search([[StoredItem.schemaAttribute: StorePayload.recordSchema]])
        #expect(records.map(\.attributes["name"]) == ["fixture-record"])
        #expect(records.map(\.secret) == [Secret("{\"kept\":true}")])
    }

    @Test("the next write raises a file's KDF parameters to this build's, and it still opens")
    func raisesParameters() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, kdf: cheapKDF).store(credential(user: "old"))
        #expect(try StoreFileFormat.parse(fileBytes(directory.storePath)).0.kdf == cheapKDF)

        let upgraded = makeStore(directory.storePath)
        #expect(try upgraded.lookup(query()).map(\.username) == ["old"], "a weaker file is still read")
        #expect(try StoreFileFormat.parse(fileBytes(directory.storePath)).0.kdf == cheapKDF, "reading does not rewrite")
        try upgraded.store(credential(user: "new"))
        let header = try StoreFileFormat.parse(fileBytes(directory.storePath)).0
        #expect(header.kdf == .recommended)
        #expect(try makeStore(directory.storePath).lookup(query()).map(\.username) == ["new", "old"])
    }

    @Test("a wrong passphrase at hand never re-keys a file that a cached key opened")
    func wrongPassphraseNeverRekeys() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, passphrase: "right", keyCacheTimeoutSeconds: 60, kdf: cheapKDF)
            .store(credential(user: "first"))
        // The cached key opens the file; the source holds another passphrase. Two writes, so a
        // second one cannot trust what the first failed to check.
        let store = makeStore(directory.storePath, passphrase: "wrong", keyCacheTimeoutSeconds: 60)
        try store.store(credential(user: "second"))
        try store.store(credential(user: "third"))
        #expect(try StoreFileFormat.parse(fileBytes(directory.storePath)).0.kdf == cheapKDF, "kept the old key")
        #expect(try makeStore(directory.storePath, passphrase: "right", kdf: cheapKDF).lookup(query()).count == 3)
        #expect(throws: StoreError.self) {
            try makeStore(directory.storePath, passphrase: "wrong", kdf: cheapKDF).lookup(query())
        }
    }

    @Test("a file with stronger parameters than this build's keeps them")
    func keepsStrongerParameters() throws {
        let directory = try TemporaryDirectory()
        let stronger = KDFParameters(opsLimit: 4, memLimit: 64 << 20)
        try makeStore(directory.storePath, kdf: stronger).store(credential(user: "a"))
        try makeStore(directory.storePath).store(credential(user: "b"))
        #expect(try StoreFileFormat.parse(fileBytes(directory.storePath)).0.kdf == stronger)
    }
}

@Suite("encrypted file store: refusing and recovering")
struct EncryptedFileFailureTests {
    @Test("a wrong passphrase is a locked-store error and leaves the file byte-identical")
    func wrongPassphrase() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        let before = try fileBytes(directory.storePath)
        let wrong = makeStore(directory.storePath, passphrase: "not the passphrase")
        #expect(throws: StoreError.self) { try wrong.lookup(query()) }
        #expect(throws: StoreError.self) { try wrong.store(credential(user: "mallory")) }
        #expect(throws: StoreError.self) { try wrong.erase(query()) }
        do {
            _ = try wrong.lookup(query())
        } catch {
            #expect(error.kind == .locked)
            #expect(error.message == "wrong passphrase for the store file \(directory.storePath)")
            #expect(!error.message.contains("not the passphrase") && !(error.hint ?? "").contains("not the passphrase"))
        }
        #expect(try fileBytes(directory.storePath) == before)
        #expect(try siblings(of: directory.storePath) == ["store", "store.lock"])
    }

    @Test("without a passphrase an existing file cannot be opened, and nothing is written")
    func noPassphrase() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        let before = try fileBytes(directory.storePath)
        #expect(throws: StoreError.self) { try makeStore(directory.storePath, passphrase: nil).lookup(query()) }
        #expect(try fileBytes(directory.storePath) == before)
    }

    @Test("looking up or erasing in a missing file asks for no passphrase and creates nothing")
    func missingFile() throws {
        let directory = try TemporaryDirectory()
        let observer = StoreObserver()
        let store = makeStore(directory.storePath, passphrase: nil, observer: observer)
        #expect(try store.lookup(query()).isEmpty)
        #expect(try store.erase(query()) == 0)
        #expect(try store.search([[StoredItem.schemaAttribute: SessionItems.schema]]).isEmpty)
        #expect(observer.passphraseRequests == 0)
        #expect(!FileManager.default.fileExists(atPath: directory.storePath))
    }

    @Test("creating the file asks for a new passphrase")
    func createPurpose() throws {
        let directory = try TemporaryDirectory()
        let observer = StoreObserver()
        try makeStore(directory.storePath, observer: observer).store(credential())
        #expect(observer.purposes == [.create])
    }

    static let damages: [(String, @Sendable ([UInt8]) -> [UInt8])] = [
        (
            "bad magic",
            { bytes in
                var bytes = bytes; bytes[0] ^= 0xFF; return bytes
            }
        ),
        (
            "a flipped ciphertext bit",
            { bytes in
                var bytes = bytes; bytes[bytes.count - 20] ^= 0x01; return bytes
            }
        ),
        (
            "a flipped tag bit",
            { bytes in
                var bytes = bytes; bytes[bytes.count - 1] ^= 0x80; return bytes
            }
        ),
        (
            "a flipped header bit",
            { bytes in
                var bytes = bytes; bytes[30] ^= 0x04; return bytes
            }
        ),
        ("truncated in the header", { bytes in Array(bytes.prefix(50)) }),
        ("truncated in the ciphertext", { bytes in Array(bytes.dropLast(5)) }),
        ("emptied", { _ in [] }),
    ]

    @Test("a damaged file is moved aside, reported, and read as empty", arguments: 0..<damages.count)
    func damaged(index: Int) throws {
        let (name, damage) = Self.damages[index]
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        let damagedBytes = damage(try fileBytes(directory.storePath))
        try writeFile(directory.storePath, damagedBytes)

        let observer = StoreObserver()
        let store = makeStore(directory.storePath, observer: observer)
        #expect(try store.lookup(query()).isEmpty, "\(name)")
        let files = try siblings(of: directory.storePath)
        let aside = try #require(files.first { $0.hasPrefix("store.damaged-") }, "\(name): nothing moved aside")
        #expect(aside.wholeMatch(of: /store\.damaged-\d{8}T\d{6}Z/) != nil, "\(aside)")
        #expect(
            try fileBytes(directory.path + "/data/portal-token/" + aside) == damagedBytes, "the damaged bytes are kept")
        #expect(!files.contains("store"))
        #expect(observer.warnings.count == 1)
        #expect(
            observer.warnings.first?.contains("moved it aside to \(directory.path)/data/portal-token/\(aside)") == true)

        try store.store(credential(user: "fresh"))
        #expect(try makeStore(directory.storePath).lookup(query()).map(\.username) == ["fresh"])
    }

    @Test("a second damaged file never replaces the first one moved aside")
    func twoDamagedFiles() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(
            atPath: directory.path + "/data/portal-token", withIntermediateDirectories: true)
        for round in 0..<2 {
            try writeFile(directory.storePath, Array("not a store \(round)".utf8))
            chmod(directory.storePath, 0o600)
            #expect(try makeStore(directory.storePath).lookup(query()).isEmpty)
        }
        let aside = try siblings(of: directory.storePath).filter { $0.hasPrefix("store.damaged-") }
        #expect(aside.count == 2)
    }

    @Test("a file from a newer format version is refused and left alone")
    func newerVersion() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        var bytes = try fileBytes(directory.storePath)
        bytes[9] = 3
        try writeFile(directory.storePath, bytes)
        let store = makeStore(directory.storePath)
        #expect(throws: StoreError.self) { try store.lookup(query()) }
        #expect(throws: StoreError.self) { try store.store(credential()) }
        do {
            _ = try store.lookup(query())
        } catch {
            #expect(error.message.contains("format version 3"))
            #expect(error.hint?.contains("upgrade portal-token") == true)
        }
        #expect(try fileBytes(directory.storePath) == bytes)
        #expect(try siblings(of: directory.storePath) == ["store", "store.lock"])
    }

    @Test(
        "a header asking for KDF costs past the documented ceiling is a foreign file: refused at once and left alone",
        arguments: [(UInt64(32), UInt64(4) << 30), (5, 64 << 20), (1, 2 << 30)])
    func kdfCeiling(passes: UInt64, memory: UInt64) throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, kdf: cheapKDF).store(credential())
        var bytes = try fileBytes(directory.storePath)
        // Rewritten as a hostile header would be, with a checksum that matches.
        for index in 0..<8 {
            bytes[11 + index] = UInt8(truncatingIfNeeded: passes >> (56 - 8 * UInt64(index)))
            bytes[19 + index] = UInt8(truncatingIfNeeded: memory >> (56 - 8 * UInt64(index)))
        }
        let checksum = Sodium.hash(Array(bytes[0..<83]), length: 16)
        bytes.replaceSubrange(83..<99, with: checksum)
        try writeFile(directory.storePath, bytes)
        let started = ContinuousClock.now
        do {
            _ = try makeStore(directory.storePath).lookup(query())
            Issue.record("a header asking for \(passes) passes over \(memory >> 20) MiB was used")
        } catch {
            #expect(
                error.message.contains(
                    """
                    asks for Argon2id with \(passes) passes over \(memory >> 20) MiB, which this portal-token does \
                    not accept
                    """
                ))
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(try fileBytes(directory.storePath) == bytes)
        #expect(KDFParameters(opsLimit: 4, memLimit: 1 << 30).isAccepted)
    }

    @Test("a store file others may read is refused with a hint", arguments: [0o640, 0o604, 0o620, 0o666])
    func openToOthers(mode: Int) throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        chmod(directory.storePath, mode_t(mode))
        let before = try fileBytes(directory.storePath)
        do {
            _ = try makeStore(directory.storePath).lookup(query())
            Issue.record("a mode \(String(mode, radix: 8)) file was read")
        } catch {
            #expect(error.message.contains("open to other users (mode \(String(mode, radix: 8)))"))
            #expect(
                error.hint
                    == "if only you have used it, restrict it with 'chmod 600 \(directory.storePath)' and try again")
        }
        #expect(throws: StoreError.self) { try makeStore(directory.storePath).store(credential(user: "x")) }
        #expect(try fileBytes(directory.storePath) == before)
    }

    @Test("a store file owned by another user is refused")
    func ownedByAnother() throws {
        try #require(geteuid() == 0, "needs root to give the file away")
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath).store(credential())
        chown(directory.storePath, 65534, 65534)
        #expect(
            throws: StoreError(
                .failed, "the store file \(directory.storePath) belongs to another user (uid 65534)",
                hint: "point PORTAL_TOKEN_FILE at a store of your own")
        ) {
            try makeStore(directory.storePath).lookup(query())
        }
    }

    @Test("a temporary file left by a writer that died is removed by the next write")
    func abandonedTemporaryFile() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath)
        try store.store(credential())
        let abandoned = directory.path + "/data/portal-token/.store.tmp-Ab12Cd"
        try writeFile(abandoned, [1, 2, 3])
        let unrelated = directory.path + "/data/portal-token/.store.tmp-notours"
        try writeFile(unrelated, [4])
        try store.store(credential(user: "bob"))
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(FileManager.default.fileExists(atPath: unrelated))
    }

    @Test("a write waits for the lock only up to its bound, then fails as timed out")
    func lockTimeout() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath, lockTimeoutMilliseconds: 200)
        try store.store(credential())
        let holder = open(directory.storePath + ".lock", O_RDWR)
        #expect(flock(holder, LOCK_EX) == 0)
        defer { close(holder) }
        let before = try fileBytes(directory.storePath)
        let started = Date()
        do {
            try store.store(credential(user: "blocked"))
            Issue.record("the write went through a held lock")
        } catch {
            #expect(error.kind == .timedOut)
            #expect(error.message == "the store file \(directory.storePath) is locked by another process")
        }
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(try store.lookup(query()).map(\.username) == ["alice"], "reads need no lock")
        #expect(try fileBytes(directory.storePath) == before)
    }
}

@Suite("encrypted file store: items")
struct EncryptedFileItemTests {
    private static let schema = "test.Schema"

    private func item(_ attributes: ItemAttributes, label: String = "", secret: String) -> StoredItem {
        StoredItem(
            attributes: attributes.merging([StoredItem.schemaAttribute: Self.schema]) { $1 }, label: label,
            secret: Secret(secret))
    }

    @Test("every character survives the JSON inside the file: quotes, backslashes, controls, emoji")
    func awkwardCharacters() throws {
        let directory = try TemporaryDirectory()
        let awkward = "q\"b\\n\nr\rt\tc\u{1}\u{1F}d\u{7F}é😀/?&=%"
        // git's protocol carries no line break in a value, so a credential's secret fields never
        // hold one (they are packed line by line, as git's libsecret helper packs them).
        let oneLine = awkward.replacingOccurrences(of: "\n", with: "").replacingOccurrences(of: "\r", with: "")
        let store = makeStore(directory.storePath)
        try store.store(
            Credential(
                protocolName: "https", host: CredentialHost(server: "example.com"), path: awkward,
                username: awkward, password: Secret(oneLine), oauthRefreshToken: Secret(oneLine)))
        try store.replace([], with: item([awkward: awkward], label: awkward, secret: awkward))
        let reopened = makeStore(directory.storePath)
        let found = try reopened.lookup(query())
        #expect(found.count == 1)
        #expect(found.first?.username == awkward && found.first?.path == awkward)
        #expect(found.first?.password.text == oneLine && found.first?.oauthRefreshToken?.text == oneLine)
        let items = try reopened.search([[StoredItem.schemaAttribute: Self.schema, awkward: awkward]])
        #expect(items.map(\.label) == [StoredItem.storableLabel(awkward)] && items.map(\.secret) == [Secret(awkward)])
    }

    @Test("a delete that matches nothing does not rewrite the file")
    func unchangedNotWritten() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath)
        try store.replace([], with: item(["a": "1"], secret: "1"))
        let before = try fileBytes(directory.storePath)
        #expect(try store.delete([[StoredItem.schemaAttribute: Self.schema, "a": "2"]]) == 0)
        #expect(try fileBytes(directory.storePath) == before)
    }

    @Test("items keep the times and sequence of their write")
    func timesAndSequence() throws {
        let directory = try TemporaryDirectory()
        let store = makeStore(directory.storePath, kdf: cheapKDF)
        // The store's own clock, time(2): the coarse realtime clock, which can read a few
        // milliseconds behind Date() and so a second earlier across a second's boundary.
        let started = Int64(time(nil))
        try store.replace([], with: item(["n": "1"], secret: "1"))
        try store.replace([], with: item(["n": "2"], secret: "2"))
        let found = try makeStore(directory.storePath, kdf: cheapKDF).search([[StoredItem.schemaAttribute: Self.schema]]
        )
        #expect(found.map(\.secret.text) == ["2", "1"])
        #expect(found[0].sequence > found[1].sequence)
        #expect(found.allSatisfy { ($0.modified ?? 0) >= started && $0.created == $0.modified })
        // Written within one second: the sequence orders them, and neither is newer by its times.
        #expect(!found[0].isNewer(than: found[1]) && !found[1].isNewer(than: found[0]))
    }

    @Test("concurrent writes from several stores lose no item")
    func concurrentWrites() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.storePath
        try makeStore(path, kdf: cheapKDF).replace([], with: item(["first": "1"], secret: "0"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    let store = makeStore(path, kdf: cheapKDF, lockTimeoutMilliseconds: 20_000)
                    for index in 0..<5 {
                        try store.replace([], with: self.item(["w": "\(writer)-\(index)"], secret: "x"))
                    }
                }
            }
            try await group.waitForAll()
        }
        let found = try makeStore(path, kdf: cheapKDF).search([[StoredItem.schemaAttribute: Self.schema]])
        #expect(found.count == 41)
        #expect(Set(found.map(\.sequence)).count == 41, "two writes got one sequence number")
    }

    @Test("a file of the second payload layout (credentials and item records) reads as items, and becomes items")
    func readsVersion2Payload() throws {
        let directory = try TemporaryDirectory()
        let session = PortalSession(
            token: Secret("token-v2"), endUserID: "user-v2", authEnvironmentID: "env-v2",
            issuedAt: 1_700_000_000, lastActivityAt: 1_700_000_000)
        let step = PendingTwoFactor(
            userJWT: Secret("jwt-v2"), endUserID: "user-v2", authEnvironmentID: "env-v1",
            expiresAt: 1_700_000_600, grantDigest: nil)
        func escaped(_ secret: Secret) -> String {
            secret.text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
        // What the previous release wrote: git credentials in `credentials[]`, a session as an
        // `item:` record, and a two-factor step as a record of the first layout.
        let payload = """
            {"nextSequence":3,"credentials":[\
            {"sequence":1,"protocol":"https","host":"old.example","username":"older","password":"p1"},\
            {"sequence":2,"protocol":"https","host":"old.example","port":8443,"path":"r.git","username":"newer",\
            "password":"p2","passwordExpiresAt":4102444800,"authtype":"Bearer","credential":"c2"}],\
            "records":{"item:io.portalhq.PortalToken.Session?auth-environment-id=env-v2&end-user-id=user-v2":\
            "\(escaped(session.payload))","portal-two-factor:env-v1":"\(escaped(step.payload))"}}
            """
        try writeSealed(payload, to: directory.storePath)
        let store = makeStore(directory.storePath, passphrase: "fixture passphrase", kdf: cheapKDF)
        let credentials = try store.lookup(CredentialQuery(protocolName: "https"))
        #expect(credentials.map(\.username) == ["newer", "older"])
        #expect(credentials[0].host == CredentialHost(server: "old.example", port: 8443))
        #expect(credentials[0].credential == Secret("c2") && credentials[0].passwordExpiresAt == 4_102_444_800)
        #expect(try Sessions(store).loadSession(authEnvironmentID: "env-v2") == .present(session))
        #expect(try TwoFactorStepItems(store).loadStep(authEnvironmentID: "env-v1") == step)
        // Any write rewrites the file as one list of items; everything reads the same afterwards.
        try store.store(credential("another.example"))
        let plaintext = try openSealed(directory.storePath)
        #expect(plaintext.contains("\"items\""))
        #expect(!plaintext.contains("\"credentials\"") && !plaintext.contains("\"records\""))
        let reopened = makeStore(directory.storePath, passphrase: "fixture passphrase", kdf: cheapKDF)
        #expect(
            try reopened.lookup(CredentialQuery(host: CredentialHost(server: "old.example", port: 8443))).count == 1)
        #expect(try Sessions(reopened).loadSession(authEnvironmentID: "env-v2") == .present(session))
        #expect(try TwoFactorStepItems(reopened).loadStep(authEnvironmentID: "env-v1") == step)
    }
}

/// Seals `payload` as the store file at `path` under the passphrase "fixture passphrase", as
/// the release that wrote that payload would have.
func writeSealed(_ payload: String, to path: String) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    let salt = Sodium.randomBytes(Sodium.saltLength)
    let derived = try #require(
        cheapKDF.derive(Secret("fixture passphrase"), salt: salt))
    let key = UnlockedKey(
        identity: KeyIdentity(formatVersion: StoreFileFormat.keyVersion, kdf: cheapKDF, salt: salt),
        derivedKey: derived)
    try writeFile(path, StoreFileFormat.seal(Array(payload.utf8), kdf: cheapKDF, salt: salt, key: key, sealed: nil))
    chmod(path, 0o600)
}

/// The decrypted payload of the store file at `path`, sealed under "fixture passphrase".
func openSealed(_ path: String) throws -> String {
    let bytes = try fileBytes(path)
    let (header, ciphertext) = try StoreFileFormat.parse(bytes)
    let identity = header.keyIdentity
    let derived = try #require(
        identity.kdf.derive(Secret("fixture passphrase"), salt: identity.salt))
    let key = UnlockedKey(identity: identity, derivedKey: derived)
    let plaintext = try #require(
        Sodium.open(ciphertext, associatedData: header.bytes, nonce: header.nonce, key: key.encryptionKey))
    return String(decoding: plaintext, as: UTF8.self)
}

extension Tag {
    @Tag static var compatibility: Self
}
