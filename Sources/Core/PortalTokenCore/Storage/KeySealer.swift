import Basics

/// Seals the encrypted file's key to this machine's TPM, so that the file opens with no
/// passphrase on the machine it was written on and on no other (docs/storage.md, "A key sealed
/// by the TPM"). The adapter is `TPMKeySealer`.
public protocol KeySealer {
    /// `key` sealed, unsealable only by this TPM and, when `pcrs` names any, only while those
    /// PCRs (of the SHA-256 bank) hold the values they hold now.
    func seal(_ key: Secret, pcrs: [Int]) throws(SealError) -> [UInt8]
    /// The key `seal` sealed with the same `pcrs`.
    func unseal(_ sealed: [UInt8], pcrs: [Int]) throws(SealError) -> Secret
}

/// Why the TPM did not seal or unseal: in words that name what to do, never the key.
public struct SealError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// No TPM, or its library, could be reached.
        case unavailable
        /// The TPM refused: another TPM's object, PCRs that changed, a lockout.
        case refused
        /// The TPM did not answer within the bound.
        case timedOut
    }

    public let kind: Kind
    public let message: String
    public let hint: String?

    public init(_ kind: Kind, _ message: String, hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.hint = hint
    }
}

/// What opens an encrypted file: its passphrase alone, or the TPM, with the passphrase for
/// recovery (`status` and `doctor` say which).
public enum FileKeyProtection: Sendable, Equatable {
    case passphrase
    /// Sealed to the TPM (bound to `pcrs`); `recovery`: the passphrase opens it too.
    case tpm(pcrs: [Int], recovery: Bool)

    /// The words `status` and `doctor` use.
    public var description: String {
        switch self {
        case .passphrase: return "the passphrase"
        case .tpm(let pcrs, let recovery):
            let bound =
                pcrs.isEmpty
                ? "" : " bound to PCR\(pcrs.count == 1 ? "" : "s") " + pcrs.map(String.init).joined(separator: ",")
            return "sealed by the TPM\(bound); "
                + (recovery ? "the passphrase recovers it" : "no passphrase opens it (file-tpm-recovery = none)")
        }
    }
}
