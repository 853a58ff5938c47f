import Foundation
import PortalTokenCore
import Testing

@testable import EncryptedFileStore

/// The file's format version 2 with a sealer that stands in for the TPM (the real one is
/// `TPMSealedFileTests`, against swtpm): what the header carries, and what a changed byte does.
@Suite("encrypted file store: a sealed key in the header")
struct SealedKeyFormatTests {
    /// Seals by XOR with a fixed pad, and counts its calls.
    final class PadSealer: KeySealer, @unchecked Sendable {
        var seals = 0, unseals = 0
        func seal(_ key: Secret, pcrs: [Int]) throws(SealError) -> [UInt8] {
            seals += 1
            return key.withBytes { $0.map { $0 ^ 0x5A } } + pcrs.map(UInt8.init)
        }
        func unseal(_ sealed: [UInt8], pcrs: [Int]) throws(SealError) -> Secret {
            unseals += 1
            guard sealed.count == Sodium.keyLength + pcrs.count else { throw SealError(.refused, "not this pad's") }
            return Secret(bytes: sealed.prefix(Sodium.keyLength).map { $0 ^ 0x5A })
        }
    }

    @Test("a sealed file opens through its sealer with no passphrase, and writes keep the sealed object")
    func opensWithoutPassphrase() throws {
        let directory = try TemporaryDirectory()
        let sealer = PadSealer()
        try makeStore(directory.storePath, kdf: cheapKDF, keySealer: sealer, sealTo: [7]).store(credential())
        let bytes = try fileBytes(directory.storePath)
        #expect(bytes[9] == 2 && Array(bytes[84..<88]) == [0, 0, 0, 0x80] && sealer.seals == 1)
        let observer = StoreObserver()
        let reader = makeStore(
            directory.storePath, passphrase: nil, kdf: cheapKDF, observer: observer, keySealer: sealer, sealTo: [7])
        #expect(try reader.lookup(query()).first?.password.text == "s3cret-password")
        #expect(observer.purposes.isEmpty, "the passphrase was asked for")
        try reader.store(credential("other.example"))
        #expect(sealer.seals == 1, "a write with the same key sealed it again")
    }

    @Test("a changed byte of the sealed object is damage: the checksum fails and the file is moved aside")
    func changedSealedByte() throws {
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, kdf: cheapKDF, keySealer: PadSealer(), sealTo: []).store(credential())
        var bytes = try fileBytes(directory.storePath)
        bytes[95] ^= 1
        try writeFile(directory.storePath, bytes)
        let observer = StoreObserver()
        let store = makeStore(
            directory.storePath, kdf: cheapKDF, observer: observer, keySealer: PadSealer(), sealTo: [])
        #expect(try store.lookup(query()).isEmpty)
        #expect(observer.warnings.contains { $0.contains("header checksum") })
    }

    @Test("a sealer that refuses leaves the passphrase to open the file, and says so once")
    func refusedFallsBackToPassphrase() throws {
        final class Refusing: KeySealer {
            func seal(_ key: Secret, pcrs: [Int]) throws(SealError) -> [UInt8] { [1] }
            func unseal(_ sealed: [UInt8], pcrs: [Int]) throws(SealError) -> Secret {
                throw SealError(.refused, "the stand-in TPM refuses")
            }
        }
        let directory = try TemporaryDirectory()
        try makeStore(directory.storePath, kdf: cheapKDF, keySealer: PadSealer(), sealTo: []).store(credential())
        let before = try fileBytes(directory.storePath)
        let locked = makeStore(directory.storePath, passphrase: nil, kdf: cheapKDF, keySealer: Refusing(), sealTo: [])
        #expect {
            try locked.lookup(query())
        } throws: { error in
            (error as? StoreError)?.message.contains("the stand-in TPM refuses") == true
        }
        #expect(try fileBytes(directory.storePath) == before)
        let observer = StoreObserver()
        let recovering = makeStore(
            directory.storePath, kdf: cheapKDF, observer: observer, keySealer: Refusing(), sealTo: [])
        #expect(try recovering.lookup(query()).count == 1)
        #expect(observer.warnings.filter { $0.contains("recovery passphrase") }.count == 1)
    }
}
