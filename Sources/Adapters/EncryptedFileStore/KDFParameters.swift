import PortalTokenCore

/// Argon2id's cost: passes over memory, and memory in bytes. Stored in every file's header, so
/// they can be raised later without breaking older files.
public struct KDFParameters: Sendable, Equatable {
    public var opsLimit: UInt64
    public var memLimit: UInt64

    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    /// No derivation: the key is random and the TPM alone holds it (`file-tpm-recovery = none`,
    /// format version 2 only).
    public static let none = KDFParameters(opsLimit: 0, memLimit: 0)

    /// 3 passes over 64 MiB: about 80 ms on the reference machine (2 cores), well inside the
    /// 250 ms unlock budget, and at the 64 MiB floor the file-store issue sets.
    public static let recommended = KDFParameters(opsLimit: 3, memLimit: 64 << 20)

    /// What a header may ask for before it is refused as a foreign file (docs/storage.md, "The encrypted file"):
    /// a hostile header must not make portal-token allocate gigabytes or spin for minutes
    /// before the tag can be checked. The ceiling is libsodium's SENSITIVE level, 4 passes over
    /// 1 GiB (about 2 s on the reference machine); 32 passes over 4 GiB took 95 s and 4 GiB.
    static let acceptedOpsLimits: ClosedRange<UInt64> = Sodium.argon2idMinimum.opsLimit...4
    static let acceptedMemLimits: ClosedRange<UInt64> = Sodium.argon2idMinimum.memLimit...(1 << 30)

    var isAccepted: Bool {
        Self.acceptedOpsLimits.contains(opsLimit) && Self.acceptedMemLimits.contains(memLimit)
    }

    /// The key Argon2id v1.3 derives at these costs; nil when libsodium refuses (out of memory,
    /// parameters out of its range).
    func derive(_ passphrase: Secret, salt: [UInt8]) -> Secret? {
        Sodium.argon2id(passphrase: passphrase, salt: salt, opsLimit: opsLimit, memLimit: memLimit)
    }

    /// The stronger of each: what a rewrite uses, so that a file never gets weaker.
    func raised(to other: KDFParameters) -> KDFParameters {
        KDFParameters(opsLimit: max(opsLimit, other.opsLimit), memLimit: max(memLimit, other.memLimit))
    }
}
