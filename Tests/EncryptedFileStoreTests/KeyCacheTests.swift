@testable import EncryptedFileStore
import Foundation
import KernelKeyring
import PortalTokenCore
import Testing

/// The kernel user keyring as the key cache. Each test's store file has a path of its own, and
/// cached keys are named after it, so tests never meet each other's keys.
@Suite("encrypted file store: the key cache")
struct KeyCacheTests {
    private func cachedKeyLine(for path: String) throws -> String? {
        let header = try StoreFileFormat.parse(fileBytes(path)).0
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let description = KeyCache.description(path: resolved, identity: header.keyIdentity)
        // Read to EOF: /proc/keys reports a size of 0, and a read sized by it stops at one page.
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/keys"))
        defer { try? handle.close() }
        let keys = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        // The 32-byte key, after the header that carries its deadline.
        let length = KernelKeyring.headerLength + 32
        return keys.split(separator: "\n").first { $0.hasSuffix(" \(description): \(length)") }.map(String.init)
    }

    @Test("a second store opens the file with the cached key and asks no passphrase")
    func secondOpenUsesCache() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 60).store(credential())
        let observer = StoreObserver()
        let cached = makeStore(directory.storePath, passphrase: nil, keyCacheTimeoutSeconds: 60, observer: observer)
        #expect(try cached.lookup(query()).map(\.username) == ["alice"])
        #expect(observer.passphraseRequests == 0)
        let line = try #require(try cachedKeyLine(for: directory.storePath))
        // /proc/keys shows the time left, never "perm": the key expires on its own.
        #expect(!line.contains(" perm "), "\(line)")
    }

    @Test("with the cache off, every new store asks for the passphrase")
    func cacheOff() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 0).store(credential())
        #expect(try cachedKeyLine(for: directory.storePath) == nil)
        #expect(throws: StoreError.self) {
            try makeStore(directory.storePath, passphrase: nil, keyCacheTimeoutSeconds: 0).lookup(query())
        }
    }

    @Test("a cached key that does not open the file is dropped, and the passphrase asked")
    func staleKeyDropped() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 0).store(credential())
        let header = try StoreFileFormat.parse(fileBytes(directory.storePath)).0
        let resolved = URL(fileURLWithPath: directory.storePath).resolvingSymlinksInPath().path
        let description = KeyCache.description(path: resolved, identity: header.keyIdentity)
        let cache = KeyCache(timeoutSeconds: 60)
        cache.store(Secret(bytes: Sodium.randomBytes(32)), as: description)
        #expect(cache.read(description) != nil)

        let observer = StoreObserver()
        #expect(
            try makeStore(directory.storePath, keyCacheTimeoutSeconds: 60, observer: observer).lookup(query()).count
                == 1)
        #expect(observer.passphraseRequests == 1)
        // The right key replaced the wrong one: the next store needs no passphrase.
        #expect(
            try makeStore(directory.storePath, passphrase: nil, keyCacheTimeoutSeconds: 60).lookup(query()).count == 1)
    }

    @Test("a wrong passphrase caches nothing")
    func wrongPassphraseNotCached() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 0).store(credential())
        #expect(throws: StoreError.self) {
            try makeStore(directory.storePath, passphrase: "wrong", keyCacheTimeoutSeconds: 60).lookup(query())
        }
        #expect(try cachedKeyLine(for: directory.storePath) == nil)
    }

    @Test("a rewrite under a new salt is cached under the new salt")
    func rekeyedFileCached() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 60, kdf: cheapKDF).store(credential(user: "old"))
        try makeStore(directory.storePath, keyCacheTimeoutSeconds: 60).store(credential(user: "new"))
        let observer = StoreObserver()
        #expect(
            try makeStore(directory.storePath, passphrase: nil, keyCacheTimeoutSeconds: 60, observer: observer)
                .lookup(query()).count == 2)
        #expect(observer.passphraseRequests == 0)
    }

    @Test("the cache name depends on path, salt, parameters and format version")
    func descriptionBinding() {
        let identity = KeyIdentity(formatVersion: 1, kdf: .recommended, salt: [UInt8](repeating: 1, count: 16))
        let base = KeyCache.description(path: "/a/store", identity: identity)
        #expect(base.hasPrefix("portal-token:file-key:"))
        var other = identity
        other.salt[0] = 2
        #expect(KeyCache.description(path: "/a/store", identity: other) != base)
        other = identity
        other.kdf.opsLimit += 1
        #expect(KeyCache.description(path: "/a/store", identity: other) != base)
        other = identity
        other.formatVersion = 2
        #expect(KeyCache.description(path: "/a/store", identity: other) != base)
        #expect(KeyCache.description(path: "/b/store", identity: identity) != base)
    }
}
