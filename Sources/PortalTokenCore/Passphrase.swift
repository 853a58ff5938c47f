/// Why the store asks for the passphrase: to open an existing file, or to create a new one (a
/// terminal prompt asks twice then).
public enum PassphrasePurpose: Sendable {
    case unlock
    case create
}

/// A passphrase and where it came from, in words a hint may show (a variable's name, a path);
/// never the passphrase itself.
public struct Passphrase: Sendable {
    public var secret: Secret
    public var origin: String

    public init(_ secret: Secret, origin: String) {
        self.secret = secret
        self.origin = origin
    }
}
