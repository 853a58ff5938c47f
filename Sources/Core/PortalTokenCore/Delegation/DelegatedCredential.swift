import Basics

/// A credential for the proxy narrower than the session (docs/delegation.md): a list of caveats,
/// each a line of text, and a tag that chains HMAC-SHA-256 over them, as macaroons do. The first
/// line names the credential (`id HEX`); the tag starts as the HMAC of that line under the root
/// key and each further line is folded in with the tag so far as the key. So whoever holds a
/// credential can add caveats and compute the new tag (`narrowed`), but cannot take one away or
/// change one: that needs a tag from before it, which the credential no longer carries. Every
/// caveat must hold for a request to pass, so adding one can only narrow what passes.
///
/// The text form is `ptd1.` and the lines with the 32-byte tag after them, in base64url without
/// padding. Pure: keys, requests and the time go in, a verdict comes out.
public struct DelegatedCredential: Sendable, Equatable {
    public static let prefix = "ptd1."
    /// A credential's id: 16 lowercase hex digits (64 random bits), not secret.
    public static let idDigits = 16
    public static let tagLength = 32
    /// The most caveat lines a credential may carry, and its longest text form.
    public static let maximumLines = 64
    public static let maximumTextLength = 8192

    /// The caveats as written; the first is `id ROOT`.
    public private(set) var lines: [String]
    /// The same, read.
    public private(set) var caveats: [Caveat]
    private var tag: [UInt8]

    /// What a caveat says.
    public enum Caveat: Sendable, Equatable {
        /// The root credential's id: the first line, and only there.
        case id(String)
        /// A credential derived from the one before it: its own id. Caveats after it are its own.
        case derived(String)
        /// Unix seconds after which no request passes.
        case expires(Int64)
        /// The methods a request may use.
        case methods([String])
        /// The paths a request may ask for: each one exactly, or, ending in `/*`, anything below it.
        case paths([String])
        /// The auth environment whose session the proxy sends with.
        case environment(String)
        /// How many requests the credential this caveat belongs to may make, counted by the proxies.
        case uses(Int)
        /// A condition on the caller, in the rules file's words (`caller container docker:3f2a*`),
        /// which only a Unix socket, where the kernel names the caller, can meet.
        case caller(AgentRules.Condition)

        public var line: String {
            switch self {
            case .id(let id): return "id " + id
            case .derived(let id): return "derived " + id
            case .expires(let time): return "expires " + String(time)
            case .methods(let methods): return (["methods"] + methods).joined(separator: " ")
            case .paths(let paths): return (["paths"] + paths).joined(separator: " ")
            case .environment(let id): return "env " + id
            case .uses(let count): return "uses " + String(count)
            case .caller(let condition): return "caller " + condition.text
            }
        }

        /// Reads one line; nil for anything this version does not know, which refuses the
        /// credential rather than ignoring a caveat.
        public init?(line: String) {
            let words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard words.count >= 2, !words.contains(where: \.isEmpty) else { return nil }
            let values = Array(words.dropFirst())
            switch words[0] {
            case "id" where values.count == 1 && DelegatedCredential.isID(values[0]): self = .id(values[0])
            case "derived" where values.count == 1 && DelegatedCredential.isID(values[0]): self = .derived(values[0])
            case "expires" where values.count == 1:
                guard let time = Int64(values[0]), time > 0, String(time) == values[0] else { return nil }
                self = .expires(time)
            case "methods":
                guard values.allSatisfy(ProxyRules.defaultMethods.contains) else { return nil }
                self = .methods(values)
            case "paths":
                guard values.allSatisfy(DelegatedCredential.isPathPattern) else { return nil }
                self = .paths(values)
            case "env" where values.count == 1: self = .environment(values[0])
            case "uses" where values.count == 1:
                guard let count = Int(values[0]), count > 0, String(count) == values[0] else { return nil }
                self = .uses(count)
            case "caller":
                guard let condition = try? AgentRules.condition(values[0], Array(values.dropFirst()), line: 0) else {
                    return nil
                }
                self = .caller(condition)
            default: return nil
            }
        }
    }

    /// A new root credential under `key`: `id ID` and the caveats.
    public static func mint(key: Secret, id: String, caveats: [Caveat]) -> DelegatedCredential {
        let first = Caveat.id(id).line
        let tag = keyed(key) { Sodium.hmacSHA256(Array(first.utf8), key: $0) }
        return DelegatedCredential(lines: [first], caveats: [.id(id)], tag: tag).adding(caveats)
    }

    /// A credential derived from this one without its key: `derived ID` and the caveats after
    /// every caveat it already has.
    public func narrowed(id: String, by caveats: [Caveat]) -> DelegatedCredential {
        adding([.derived(id)] + caveats)
    }

    private func adding(_ caveats: [Caveat]) -> DelegatedCredential {
        var credential = self
        for caveat in caveats {
            let line = caveat.line
            credential.tag = Sodium.hmacSHA256(Array(line.utf8), key: credential.tag)
            credential.lines.append(line)
            credential.caveats.append(caveat)
        }
        return credential
    }

    private init(lines: [String], caveats: [Caveat], tag: [UInt8]) {
        self.lines = lines
        self.caveats = caveats
        self.tag = tag
    }

    /// A fresh id from the system's CSPRNG.
    public static func makeID() -> String {
        var text: [UInt8] = []
        for byte in Sodium.randomBytes(idDigits / 2) { Hex.appendDigits(of: byte, to: &text) }
        return String(decoding: text, as: UTF8.self)
    }

    public static func isID(_ text: String) -> Bool {
        text.utf8.count == idDigits && text.utf8.allSatisfy { Hex.value(of: $0) != nil && !(0x41...0x46).contains($0) }
    }

    // MARK: Text form

    public var text: Secret {
        var body = Array(lines.joined(separator: "\n").utf8)
        body.append(0)
        body += tag
        defer { zeroize(&body) }
        return Secret(bytes: Array(Self.prefix.utf8) + Base64.encodeURL(body))
    }

    /// Reads the text form strictly: the prefix, canonical base64url, lines that each read as a
    /// caveat with `id` first and only first, and a whole tag. nil for anything else.
    public init?(text: some Collection<UInt8>) {
        let prefix = Array(Self.prefix.utf8)
        guard text.count <= Self.maximumTextLength, text.starts(with: prefix) else { return nil }
        let encoded = Array(text.dropFirst(prefix.count))
        guard var body = Base64.decode(encoded), Base64.encodeURL(body) == encoded else { return nil }
        defer { zeroize(&body) }
        guard body.count > Self.tagLength + 1, body[body.count - Self.tagLength - 1] == 0 else { return nil }
        let lineBytes = body[..<(body.count - Self.tagLength - 1)]
        guard !lineBytes.contains(0), let text = String(validating: lineBytes, as: UTF8.self) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count <= Self.maximumLines else { return nil }
        var caveats: [Caveat] = []
        for (index, line) in lines.enumerated() {
            guard let caveat = Caveat(line: line), caveat.line == line else { return nil }
            if case .id = caveat { guard index == 0 else { return nil } } else if index == 0 { return nil }
            caveats.append(caveat)
        }
        self.init(lines: lines, caveats: caveats, tag: Array(body.suffix(Self.tagLength)))
    }

    /// The ids of the chain, the root's first and this credential's last.
    public var chain: [String] {
        caveats.compactMap {
            switch $0 {
            case .id(let id), .derived(let id): return id
            default: return nil
            }
        }
    }

    public var id: String { chain.last ?? "" }

    /// One credential of the chain: its id, its parent's, the caveats that follow its id, and the
    /// earliest expiry up to them.
    public struct Link: Sendable, Equatable {
        public var id: String
        public var parent: String?
        public var caveats: [Caveat]
        public var expires: Int64?
    }

    /// The chain's credentials, the root's first.
    public var links: [Link] {
        var links: [Link] = []
        var expires: Int64?
        for caveat in caveats {
            switch caveat {
            case .id(let id), .derived(let id):
                links.append(Link(id: id, parent: links.last?.id, caveats: [], expires: expires))
            case .expires(let time):
                expires = min(time, expires ?? time)
                links[links.count - 1].expires = expires
                links[links.count - 1].caveats.append(caveat)
            default:
                links[links.count - 1].caveats.append(caveat)
            }
        }
        return links
    }

    /// The earliest expiry of the chain.
    public var expires: Int64? {
        caveats.compactMap {
            if case .expires(let time) = $0 { return time }
            return nil
        }.min()
    }

    /// A `paths` value: a path without dot segments, empty segments or encoded slashes, or one
    /// followed by `/*`.
    public static func isPathPattern(_ pattern: String) -> Bool {
        let base = pattern.hasSuffix("/*") ? String(pattern.dropLast(2)) : pattern
        return base.hasPrefix("/") && ProxyRules.isAllowed(path: base[...], prefixes: [base])
    }

    /// `/a/b` is that path alone; `/a/b/*` every path below it, not `/a/b` itself.
    static func path(_ path: Substring, matches pattern: String) -> Bool {
        guard pattern.hasSuffix("/*") else {
            return path == pattern && ProxyRules.isAllowed(path: path, prefixes: [pattern])
        }
        let base = String(pattern.dropLast(2))
        return path.count > base.count + 1 && ProxyRules.isAllowed(path: path, prefixes: [base])
    }

    // MARK: Verification

    /// A request as the proxy sees it, for the caveats to judge.
    public struct Request: Sendable {
        public var method: String
        public var path: Substring
        /// The environment whose session the proxy sends with; nil when it is not known here.
        public var environment: String?
        /// The kernel's word on the caller, on a Unix socket; nil on a loopback port.
        public var caller: CallerIdentity?
        public var socket: AgentRules.Socket
        public var now: Int64
        /// Whether `env` caveats are left to the proxy this one sends to (the agent's, in client
        /// mode), which knows the environment of the session it holds and judges them there.
        public var environmentJudgedUpstream: Bool

        public init(
            method: String, path: Substring, environment: String?, caller: CallerIdentity?,
            socket: AgentRules.Socket = .main, now: Int64, environmentJudgedUpstream: Bool = false
        ) {
            self.method = method
            self.path = path
            self.environment = environment
            self.caller = caller
            self.socket = socket
            self.now = now
            self.environmentJudgedUpstream = environmentJudgedUpstream
        }
    }

    /// What verification found.
    public enum Verdict: Sendable, Equatable {
        /// Every caveat holds: the ids of the chain, and for each id that counts its uses, the
        /// most it may make.
        case passes(chain: [String], uses: [String: Int])
        case refused(String)
    }

    /// Whether the tag is the one `key` makes over these lines.
    public func isSigned(by key: Secret) -> Bool {
        guard let first = lines.first else { return false }
        var remade = Self.keyed(key) { Sodium.hmacSHA256(Array(first.utf8), key: $0) }
        for line in lines.dropFirst() { remade = Sodium.hmacSHA256(Array(line.utf8), key: remade) }
        return Sodium.equal(remade, tag)
    }

    /// Checks the tag under each of `keys`, then every caveat against the request.
    public func verify(_ request: Request, keys: [Secret]) -> Verdict {
        guard keys.contains(where: isSigned(by:)) else { return .refused("the credential's signature does not verify") }
        return judge(request)
    }

    /// Every caveat against the request, the tag aside (for a proxy whose upstream checks it).
    public func judge(_ request: Request) -> Verdict {
        var uses: [String: Int] = [:]
        var current = ""
        var expiry = false
        for caveat in caveats {
            switch caveat {
            case .id(let id), .derived(let id):
                current = id
            case .expires(let time):
                expiry = true
                guard request.now < time else { return .refused("the credential expired") }
            case .methods(let methods):
                guard methods.contains(request.method) else {
                    return .refused("the credential does not allow the method \(request.method)")
                }
            case .paths(let patterns):
                guard patterns.contains(where: { Self.path(request.path, matches: $0) }) else {
                    return .refused("the credential does not allow this path")
                }
            case .environment(let environment):
                guard request.environmentJudgedUpstream || request.environment == environment else {
                    return .refused("the credential is for another environment")
                }
            case .uses(let count):
                uses[current] = min(count, uses[current] ?? count)
            case .caller(let condition):
                guard let caller = request.caller else {
                    return .refused("the credential names its caller, and a loopback port cannot tell who asks")
                }
                guard condition.holds(for: caller, on: request.socket) else {
                    return .refused("the caller does not meet the credential's condition '\(condition.text)'")
                }
            }
        }
        guard expiry else { return .refused("the credential has no expiry") }
        return .passes(chain: chain, uses: uses)
    }

    /// The root key of a session's credentials, made from its token: a credential dies with the
    /// session it was minted under, and no key is stored anywhere.
    public static func rootKey(of session: PortalSession) -> Secret {
        var key = keyed(session.token) { Sodium.hmacSHA256(Array("portal-token delegation root key v1".utf8), key: $0) }
        defer { zeroize(&key) }
        return Secret(bytes: key)
    }

    /// `body` with a copy of the secret's bytes, wiped afterwards.
    private static func keyed<Result>(_ secret: Secret, _ body: ([UInt8]) -> Result) -> Result {
        var bytes = secret.withBytes { Array($0) }
        defer { zeroize(&bytes) }
        return body(bytes)
    }
}
