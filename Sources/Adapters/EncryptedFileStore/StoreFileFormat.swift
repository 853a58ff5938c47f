import PortalTokenCore

/// The store file's bytes (documented in docs/file-store.md).
///
/// Format version 1, integers big-endian:
///
///     offset size
///          0    8  magic "PTSTORE\0"
///          8    2  format version: 1
///         10    1  KDF algorithm: 2 = Argon2id v1.3 (libsodium's crypto_pwhash_ALG_ARGON2ID13);
///                  0 = none (version 2 only): the key is random, its costs 0, and only the
///                  sealed copy opens the file
///         11    8  Argon2id opslimit (passes)
///         19    8  Argon2id memlimit (bytes)
///         27   16  salt
///         43   24  XChaCha20-Poly1305 nonce, fresh for every write
///         67   16  key check: BLAKE2b-128 keyed with the derived key, over a fixed label
///         83   16  header checksum: BLAKE2b-128 of bytes 0..<83
///         99    …  XChaCha20-Poly1305-IETF ciphertext of the JSON payload, 16-byte tag last,
///                  with bytes 0..<99 as associated data
///
/// Format version 2 is version 1 with the key sealed by a TPM in the header (bytes 0..<83 as
/// in version 1, with version 2):
///
///         83    1  sealing: 1 = TPM 2.0 (TPMKeySealer's objects)
///         84    4  the PCRs of the SHA-256 bank the sealed key is bound to, bit i for PCR i
///         88    2  length N of the sealed object
///         90    N  the sealed object: its TPM2B_PUBLIC and TPM2B_PRIVATE, marshalled
///       90+N   16  header checksum: BLAKE2b-128 of bytes 0..<90+N
///      106+N    …  the ciphertext, with bytes 0..<106+N as associated data
///
/// The key check tells a wrong passphrase (the file is left alone) from a damaged file (moved
/// aside); the header checksum tells a damaged header from a wrong passphrase. Neither helps an
/// attacker: each guess still costs one Argon2id derivation, as the tag would.
enum StoreFileFormat {
    static let magic: [UInt8] = Array("PTSTORE".utf8) + [0]
    /// The newest version this build reads: it writes 2 when the key is sealed, else 1, which
    /// every earlier build reads.
    static let currentVersion: UInt16 = 2
    /// The key's derivation, the same in both versions: Argon2id over the passphrase.
    static let keyVersion: UInt16 = 1
    static let argon2id13 = Sodium.argon2id13
    static let tpmSealing: UInt8 = 1
    /// Past this a sealed object is not one (a TPM2B_PUBLIC and a TPM2B_PRIVATE are far smaller).
    static let maximumSealedLength = 4096

    static let keyCheckLength = 16
    static let checksumLength = 16
    static let version1HeaderLength = 8 + 2 + 1 + 8 + 8 + 16 + 24 + 16 + 16

    enum Problem: Error, Equatable {
        /// Bad magic, truncated, failed checksum or tag: moved aside.
        case damaged(String)
        /// Written by a newer portal-token: refused and left alone.
        case newerVersion(UInt16)
        /// A KDF this build does not know, or costs beyond what it accepts: left alone.
        case unsupportedKDF(String)
    }

    /// Reads the header; the ciphertext is what follows it.
    static func parse(_ file: [UInt8]) throws(Problem) -> (StoreFileHeader, ArraySlice<UInt8>) {
        guard file.count >= magic.count + 2 else {
            throw .damaged(file.isEmpty ? "it is empty" : "it is truncated")
        }
        guard file.starts(with: magic) else { throw .damaged("it does not start with the store's magic bytes") }
        let version = UInt16(file[8]) << 8 | UInt16(file[9])
        switch version {
        case 1, 2:
            return try parseHeader(file, version: version)
        case let newer where newer > currentVersion:
            throw .newerVersion(newer)
        default:
            throw .damaged("it names format version \(version), which never existed")
        }
    }

    private static func parseHeader(_ file: [UInt8], version: UInt16) throws(Problem) -> (
        StoreFileHeader, ArraySlice<UInt8>
    ) {
        var length = version1HeaderLength
        if version == 2 {
            let fixed = version1HeaderLength - checksumLength + 7
            guard file.count >= fixed else { throw .damaged("it is truncated") }
            let sealedLength = Int(file[fixed - 2]) << 8 | Int(file[fixed - 1])
            guard file[fixed - 7] == tpmSealing, sealedLength > 0, sealedLength <= maximumSealedLength else {
                throw .damaged("its header names a sealed key it cannot hold")
            }
            length = fixed + sealedLength + checksumLength
        }
        guard file.count >= length + Sodium.tagLength else { throw .damaged("it is truncated") }
        let headerBytes = Array(file[0..<length])
        let checksumStart = length - checksumLength
        guard
            Sodium.equal(
                Sodium.hash(Array(headerBytes[0..<checksumStart]), length: checksumLength),
                Array(headerBytes[checksumStart...]))
        else {
            throw .damaged("its header checksum does not match")
        }
        var reader = ByteReader(headerBytes, from: 10)
        let algorithm = reader.uint8()
        let kdf = KDFParameters(opsLimit: reader.uint64(), memLimit: reader.uint64())
        let salt = reader.bytes(Sodium.saltLength)
        let nonce = reader.bytes(Sodium.nonceLength)
        let keyCheck = reader.bytes(keyCheckLength)
        var sealed: SealedKey?
        if version == 2 {
            _ = reader.uint8()
            let mask = reader.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let count = Int(reader.uint8()) << 8 | Int(reader.uint8())
            sealed = SealedKey(pcrs: (0..<32).filter { mask & (1 << $0) != 0 }, object: reader.bytes(count))
        }
        if algorithm == 0, version == 2, kdf == .none {
            // No passphrase opens it: the TPM's sealed copy alone.
        } else {
            guard algorithm == argon2id13 else { throw .unsupportedKDF("KDF algorithm \(algorithm)") }
            guard kdf.isAccepted else {
                throw .unsupportedKDF("Argon2id with \(kdf.opsLimit) passes over \(kdf.memLimit >> 20) MiB")
            }
        }
        let header = StoreFileHeader(
            formatVersion: version, kdf: kdf, salt: salt, nonce: nonce, keyCheck: keyCheck, sealed: sealed,
            bytes: headerBytes)
        return (header, file[length...])
    }

    /// A complete file: header and encrypted payload, in version 2 when the key is sealed.
    static func seal(
        _ plaintext: [UInt8], kdf: KDFParameters, salt: [UInt8], key: UnlockedKey, sealed: SealedKey?
    ) -> [UInt8] {
        let nonce = Sodium.randomBytes(Sodium.nonceLength)
        let version: UInt16 = sealed == nil ? 1 : 2
        var header = magic
        header.append(contentsOf: [UInt8(version >> 8), UInt8(version & 0xFF), kdf == .none ? 0 : argon2id13])
        header.appendBigEndian(kdf.opsLimit)
        header.appendBigEndian(kdf.memLimit)
        header.append(contentsOf: salt)
        header.append(contentsOf: nonce)
        header.append(contentsOf: key.keyCheck)
        if let sealed {
            let mask = sealed.pcrs.reduce(UInt32(0)) { $0 | (1 << UInt32($1)) }
            header.append(tpmSealing)
            header.append(contentsOf: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: mask >> $0) })
            header.append(contentsOf: [UInt8(sealed.object.count >> 8), UInt8(sealed.object.count & 0xFF)])
            header.append(contentsOf: sealed.object)
        }
        header.append(contentsOf: Sodium.hash(header, length: checksumLength))
        return header + Sodium.seal(plaintext, associatedData: header, nonce: nonce, key: key.encryptionKey)
    }
}

/// A parsed header, and the bytes it was read from (the associated data of the payload).
struct StoreFileHeader: Equatable {
    var formatVersion: UInt16
    var kdf: KDFParameters
    var salt: [UInt8]
    var nonce: [UInt8]
    var keyCheck: [UInt8]
    /// The key as the TPM sealed it (version 2).
    var sealed: SealedKey?
    var bytes: [UInt8]

    var keyIdentity: KeyIdentity {
        KeyIdentity(formatVersion: StoreFileFormat.keyVersion, kdf: kdf, salt: salt)
    }
}

/// The file's key sealed by the TPM, and the PCRs it is bound to.
struct SealedKey: Equatable {
    var pcrs: [Int]
    var object: [UInt8]
}

/// What a derived key depends on besides the passphrase. A cached key is found by it, so a new
/// salt, new parameters or a new derivation never meet a stale key.
struct KeyIdentity: Equatable {
    /// The derivation's version (`StoreFileFormat.keyVersion`), whatever the file's format.
    var formatVersion: UInt16
    var kdf: KDFParameters
    var salt: [UInt8]
}

/// The Argon2id output and the two subkeys taken from it: one encrypts, one recognises the
/// right passphrase.
struct UnlockedKey {
    let identity: KeyIdentity
    /// What Argon2id produced; what the key cache keeps.
    let derivedKey: Secret
    let encryptionKey: Secret
    let keyCheck: [UInt8]

    init(identity: KeyIdentity, derivedKey: Secret) {
        self.identity = identity
        self.derivedKey = derivedKey
        encryptionKey = Sodium.subkey(
            of: derivedKey, label: "portal-token file store: encryption", length: Sodium.keyLength)
        keyCheck = Sodium.subkey(
            of: derivedKey, label: "portal-token file store: key check",
            length: StoreFileFormat.keyCheckLength
        ).withBytes { Array($0) }
    }

    func opens(_ header: StoreFileHeader) -> Bool {
        identity == header.keyIdentity && Sodium.equal(keyCheck, header.keyCheck)
    }
}

private struct ByteReader {
    let bytes: [UInt8]
    var index: Int

    init(_ bytes: [UInt8], from index: Int) {
        self.bytes = bytes
        self.index = index
    }

    mutating func uint8() -> UInt8 {
        defer { index += 1 }
        return bytes[index]
    }

    mutating func uint64() -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(uint8()) }
        return value
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        defer { index += count }
        return Array(bytes[index..<(index + count)])
    }
}

extension [UInt8] {
    mutating func appendBigEndian(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}
