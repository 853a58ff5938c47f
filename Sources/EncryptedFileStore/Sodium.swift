import CSodium
import PortalTokenCore

/// The few libsodium primitives the store uses, over Swift buffers. Key material travels as
/// `Secret`, whose storage is wiped when released.
enum Sodium {
    static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    static let saltLength = Int(crypto_pwhash_SALTBYTES)

    /// sodium_init is idempotent and thread-safe; it must run before anything else.
    static let initialized: Bool = sodium_init() >= 0

    nonisolated(unsafe) private static let emptyString: UnsafeMutablePointer<CChar> = {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        pointer.pointee = 0
        return pointer
    }()

    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return bytes
    }

    /// Argon2id v1.3; nil when libsodium refuses (out of memory, parameters out of its range).
    static func argon2id(passphrase: Secret, salt: [UInt8], parameters: KDFParameters) -> Secret? {
        var key = [UInt8](repeating: 0, count: keyLength)
        defer { zeroize(&key) }
        let status = passphrase.withBytes { phrase in
            // An empty buffer may have no address; libsodium still wants a valid pointer.
            let phrasePointer = phrase.baseAddress?.assumingMemoryBound(to: CChar.self) ?? UnsafePointer(emptyString)
            return key.withUnsafeMutableBufferPointer { output in
                crypto_pwhash(
                    output.baseAddress!, UInt64(output.count), phrasePointer, UInt64(phrase.count),
                    salt, parameters.opsLimit, Int(parameters.memLimit),
                    crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        return status == 0 ? Secret(bytes: key) : nil
    }

    /// Keyed BLAKE2b of a fixed label: how independent subkeys come from one derived key.
    static func subkey(of key: Secret, label: String, length: Int) -> Secret {
        var output = [UInt8](repeating: 0, count: length)
        defer { zeroize(&output) }
        let message = Array(label.utf8)
        key.withBytes { keyBytes in
            _ = crypto_generichash(
                &output, output.count, message, UInt64(message.count),
                keyBytes.bindMemory(to: UInt8.self).baseAddress, keyBytes.count)
        }
        return Secret(bytes: output)
    }

    /// Unkeyed BLAKE2b, for checksums and cache names.
    static func hash(_ bytes: [UInt8], length: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        _ = crypto_generichash(&output, output.count, bytes, UInt64(bytes.count), nil, 0)
        return output
    }

    static func seal(_ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8], key: Secret) -> [UInt8] {
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var written: UInt64 = 0
        key.withBytes { keyBytes in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                &ciphertext, &written, plaintext, UInt64(plaintext.count),
                associatedData, UInt64(associatedData.count), nil, nonce,
                keyBytes.bindMemory(to: UInt8.self).baseAddress!)
        }
        return ciphertext
    }

    /// The plaintext, or nil when the tag does not verify.
    static func open(_ ciphertext: ArraySlice<UInt8>, associatedData: [UInt8], nonce: [UInt8], key: Secret) -> [UInt8]?
    {
        guard ciphertext.count >= tagLength else { return nil }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        var written: UInt64 = 0
        let status = key.withBytes { keyBytes in
            ciphertext.withUnsafeBufferPointer { sealed in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    &plaintext, &written, nil, sealed.baseAddress!, UInt64(sealed.count),
                    associatedData, UInt64(associatedData.count), nonce,
                    keyBytes.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        guard status == 0 else {
            zeroize(&plaintext)
            return nil
        }
        return plaintext
    }

    /// Comparison in time independent of where the bytes differ.
    static func equal(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.count == rhs.count && sodium_memcmp(lhs, rhs, lhs.count) == 0
    }
}

/// Argon2id's cost: passes over memory, and memory in bytes. Stored in every file's header, so
/// they can be raised later without breaking older files.
public struct KDFParameters: Sendable, Equatable {
    public var opsLimit: UInt64
    public var memLimit: UInt64

    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    /// 3 passes over 64 MiB: about 80 ms on the reference machine (2 cores), well inside the
    /// 250 ms unlock budget, and at the 64 MiB floor the file-store issue sets.
    public static let recommended = KDFParameters(opsLimit: 3, memLimit: 64 << 20)

    /// What a header may ask for before it is refused as a foreign file (docs/storage.md, "The encrypted file"):
    /// a hostile header must not make portal-token allocate gigabytes or spin for minutes
    /// before the tag can be checked. The ceiling is libsodium's SENSITIVE level, 4 passes over
    /// 1 GiB (about 2 s on the reference machine); 32 passes over 4 GiB took 95 s and 4 GiB.
    static let acceptedOpsLimits: ClosedRange<UInt64> = UInt64(crypto_pwhash_argon2id_OPSLIMIT_MIN)...4
    static let acceptedMemLimits: ClosedRange<UInt64> = UInt64(crypto_pwhash_argon2id_MEMLIMIT_MIN)...(1 << 30)

    var isAccepted: Bool {
        Self.acceptedOpsLimits.contains(opsLimit) && Self.acceptedMemLimits.contains(memLimit)
    }

    /// The stronger of each: what a rewrite uses, so that a file never gets weaker.
    func raised(to other: KDFParameters) -> KDFParameters {
        KDFParameters(opsLimit: max(opsLimit, other.opsLimit), memLimit: max(memLimit, other.memLimit))
    }
}
