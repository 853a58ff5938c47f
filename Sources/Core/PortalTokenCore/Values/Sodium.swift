import Basics
import CSodium

/// libsodium's primitives, over Swift buffers: the one wrapper every module uses (digests for the
/// core, the encrypted file's cipher and key derivation, random bytes). Key material travels as
/// `Secret`, whose storage is wiped when released.
public enum Sodium {
    public static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    public static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    public static let saltLength = Int(crypto_pwhash_SALTBYTES)

    /// Argon2id v1.3's number, as the file's header stores it.
    public static let argon2id13 = UInt8(crypto_pwhash_ALG_ARGON2ID13)
    /// The least passes and memory libsodium's Argon2id takes.
    public static let argon2idMinimum = (
        opsLimit: UInt64(crypto_pwhash_argon2id_OPSLIMIT_MIN), memLimit: UInt64(crypto_pwhash_argon2id_MEMLIMIT_MIN)
    )

    /// sodium_init is idempotent and thread-safe; libsodium asks for it before any other call.
    public static let ready: Bool = sodium_init() >= 0

    nonisolated(unsafe) private static let emptyString: UnsafeMutablePointer<CChar> = {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        pointer.pointee = 0
        return pointer
    }()

    public static func randomBytes(_ count: Int) -> [UInt8] {
        precondition(ready, "libsodium could not be initialised")
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return bytes
    }

    /// Argon2id v1.3; nil when libsodium refuses (out of memory, parameters out of its range).
    public static func argon2id(passphrase: Secret, salt: [UInt8], opsLimit: UInt64, memLimit: UInt64) -> Secret? {
        var key = [UInt8](repeating: 0, count: keyLength)
        defer { zeroize(&key) }
        let status = passphrase.withBytes { phrase in
            // An empty buffer may have no address; libsodium still wants a valid pointer.
            let phrasePointer = phrase.baseAddress?.assumingMemoryBound(to: CChar.self) ?? UnsafePointer(emptyString)
            return key.withUnsafeMutableBufferPointer { output in
                crypto_pwhash(
                    output.baseAddress!, UInt64(output.count), phrasePointer, UInt64(phrase.count),
                    salt, opsLimit, Int(memLimit),
                    crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        return status == 0 ? Secret(bytes: key) : nil
    }

    /// Keyed BLAKE2b of a fixed label: how independent subkeys come from one derived key.
    public static func subkey(of key: Secret, label: String, length: Int) -> Secret {
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
    public static func hash(_ bytes: [UInt8], length: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        _ = crypto_generichash(&output, output.count, bytes, UInt64(bytes.count), nil, 0)
        return output
    }

    public static func seal(_ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8], key: Secret) -> [UInt8] {
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
    public static func open(_ ciphertext: ArraySlice<UInt8>, associatedData: [UInt8], nonce: [UInt8], key: Secret)
        -> [UInt8]?
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
    public static func equal(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.count == rhs.count && sodium_memcmp(lhs, rhs, lhs.count) == 0
    }

    /// SHA-256 (FIPS 180-4).
    public static func sha256(_ message: [UInt8]) -> [UInt8] {
        precondition(ready, "libsodium could not be initialised")
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256(&digest, message, UInt64(message.count))
        return digest
    }

    /// SHA-256 of the bytes `next` writes into its buffer, chunk by chunk: it returns how many
    /// it wrote, 0 at the end, or a negative number on failure (then the result is nil).
    public static func sha256(streaming next: (UnsafeMutableRawBufferPointer) -> Int) -> [UInt8]? {
        precondition(ready, "libsodium could not be initialised")
        var state = crypto_hash_sha256_state()
        _ = crypto_hash_sha256_init(&state)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { next($0) }
            if count < 0 { return nil }
            if count == 0 { break }
            _ = crypto_hash_sha256_update(&state, chunk, UInt64(count))
        }
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256_final(&state, &digest)
        return digest
    }

    /// HMAC (RFC 2104) over SHA-256, in libsodium's streaming form, which takes a key of any
    /// length as RFC 2104 does.
    public static func hmacSHA256(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        precondition(ready, "libsodium could not be initialised")
        var state = crypto_auth_hmacsha256_state()
        defer { withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) } }
        var digest = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        _ = crypto_auth_hmacsha256_init(&state, key, key.count)
        _ = crypto_auth_hmacsha256_update(&state, message, UInt64(message.count))
        _ = crypto_auth_hmacsha256_final(&state, &digest)
        return digest
    }
}
