@testable import EncryptedFileStore
import Foundation
import PortalTokenCore
import Synchronization

/// A directory of its own for each test, removed afterwards.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "portal-token-file-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: made)
    }

    /// A store path whose directory does not exist yet, so the store has to create it.
    var storePath: String { path + "/data/portal-token/store" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// What a store said on its warning sink, and how often it asked for the passphrase.
final class StoreObserver: Sendable {
    private let state = Mutex<(warnings: [String], passphraseRequests: [PassphrasePurpose])>(([], []))

    var warnings: [String] { state.withLock { $0.warnings } }
    var passphraseRequests: Int { state.withLock { $0.passphraseRequests.count } }
    var purposes: [PassphrasePurpose] { state.withLock { $0.passphraseRequests } }

    func warn(_ line: String) { state.withLock { $0.warnings.append(line) } }
    func asked(_ purpose: PassphrasePurpose) { state.withLock { $0.passphraseRequests.append(purpose) } }
}

/// Cheap Argon2id parameters for tests that are about something other than the KDF's cost.
let cheapKDF = KDFParameters(opsLimit: 1, memLimit: 8 << 10)

func makeStore(
    _ path: String, passphrase: String? = "correct horse battery staple",
    keyCacheTimeoutSeconds: Int = 0, kdf: KDFParameters = .recommended,
    lockTimeoutMilliseconds: Int = 3000, observer: StoreObserver = StoreObserver(),
    keySealer: (any KeySealer)? = nil, sealTo: [Int]? = nil
) -> EncryptedFileStore {
    EncryptedFileStore(
        path: path, keyCacheTimeoutSeconds: keyCacheTimeoutSeconds,
        lock: StoreFileLock(path: path, timeoutMilliseconds: lockTimeoutMilliseconds), kdfParameters: kdf,
        passphrase: { purpose throws(StoreError) in
            observer.asked(purpose)
            guard let passphrase else {
                throw StoreError(.locked, "no passphrase for the encrypted file store")
            }
            return Passphrase(Secret(passphrase), origin: "the test")
        },
        warn: observer.warn, keySealer: keySealer, sealTo: sealTo)
}

func credential(
    _ host: String = "example.com", user: String = "alice", password: String = "s3cret-password",
    refreshToken: String? = nil
) -> Credential {
    Credential(
        protocolName: "https", host: CredentialHost(server: host), username: user,
        password: Secret(password), oauthRefreshToken: refreshToken.map(Secret.init))
}

func query(_ host: String = "example.com") -> CredentialQuery {
    CredentialQuery(protocolName: "https", host: CredentialHost(server: host))
}

func fileBytes(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

func mode(of path: String) throws -> Int {
    (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as! NSNumber).intValue
}

func siblings(of path: String) throws -> [String] {
    let directory = (path as NSString).deletingLastPathComponent
    return try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
}

extension [UInt8] {
    func contains(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}

/// git credentials in the file, through their codec, as the commands reach them.
extension EncryptedFileStore {
    func store(_ credential: Credential) throws(StoreError) { try CredentialItems(self).store(credential) }
    func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] { try CredentialItems(self).lookup(query) }
    @discardableResult
    func erase(_ query: CredentialQuery) throws(StoreError) -> Int { try CredentialItems(self).erase(query) }
}
