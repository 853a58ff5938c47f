/// Why the store asks for the passphrase: to open an existing file, again after a typed one
/// did not open it, or to create a new one (a terminal prompt asks twice then).
public enum PassphrasePurpose: Sendable {
    case unlock
    case unlockAgain
    case create
    /// A new passphrase for a file there already (`file-key --new-passphrase`, or a file keyed
    /// for the TPM alone given one).
    case change
}

/// A passphrase and where it came from, in words a hint may show (a variable's name, a path);
/// never the passphrase itself.
public struct Passphrase: Sendable {
    public var secret: Secret
    public var origin: String
    /// Typed by a person, who may mistype it and can be asked again; a file, a variable or a
    /// credential would only give the same wrong one.
    public var isTyped: Bool

    public init(_ secret: Secret, origin: String, isTyped: Bool = false) {
        self.secret = secret
        self.origin = origin
        self.isTyped = isTyped
    }

    /// How many times a person is asked before a wrong passphrase is an error, as sudo asks.
    public static let typedAttempts = 3
}
