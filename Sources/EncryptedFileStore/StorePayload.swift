import PortalTokenCore

/// What the store file holds once decrypted: every git credential, secrets included, and the
/// named records other parts of portal-token keep beside them (Portal sessions).
///
/// As JSON:
///
///     {"nextSequence": 3,
///      "credentials": [{"sequence": 2, "protocol": "https", "host": "example.com", "port": 8443,
///                       "path": "repo.git", "username": "alice", "password": "…",
///                       "passwordExpiresAt": 1767225600, "oauthRefreshToken": "…",
///                       "authtype": "Bearer", "credential": "…"}],
///      "records": {"name": "opaque UTF-8 text, kept as a Secret"}}
///
/// `port`, `path`, `passwordExpiresAt`, `oauthRefreshToken` and the `authtype`/`credential`
/// pair (git 2.46+) are left out when absent.
/// Unknown members are skipped when reading, so a newer writer's additions do not break it.
struct StorePayload: Equatable {
    struct Entry: Equatable {
        var credential: Credential
        /// Higher is more recently stored; it keeps "most recent first" deterministic where
        /// timestamps could tie.
        var sequence: Int64
    }

    var entries: [Entry] = []
    var nextSequence: Int64 = 1
    /// Named records (Portal sessions, two-factor steps): secrets, kept in wipeable buffers from
    /// the decrypted plaintext to the caller.
    var records: [String: Secret] = [:]

    static let empty = StorePayload()

    // MARK: Credential operations (the same rules as every CredentialStore)

    func lookup(_ query: CredentialQuery) -> [Credential] {
        var query = query
        query.password = nil
        return entries.filter { query.matches($0.credential) }
            .sorted { $0.sequence > $1.sequence }
            .map(\.credential)
    }

    mutating func store(_ credential: Credential) {
        entries.removeAll { $0.credential.occupiesSameSlot(as: credential) }
        entries.append(Entry(credential: credential, sequence: nextSequence))
        nextSequence += 1
    }

    mutating func erase(_ query: CredentialQuery) -> Int {
        let before = entries.count
        entries.removeAll { query.matches($0.credential) }
        return before - entries.count
    }

    // MARK: JSON

    /// The plaintext; the caller zeroes it once it is encrypted.
    func encoded() -> [UInt8] {
        var writer = JSONWriter()
        // Room for the worst case up front (every byte escaped as \u00XX), so that growing the
        // buffer never leaves an unwiped copy of a password behind.
        writer.bytes.reserveCapacity(estimatedEncodedSize)
        writer.beginObject()
        writer.key("nextSequence")
        writer.number(nextSequence)
        writer.key("credentials")
        writer.beginArray()
        for entry in entries {
            let credential = entry.credential
            writer.beginObject()
            writer.key("sequence")
            writer.number(entry.sequence)
            writer.key("protocol")
            writer.string(credential.protocolName)
            if let host = credential.host {
                writer.key("host")
                writer.string(host.server)
                if let port = host.port {
                    writer.key("port")
                    writer.number(Int64(port))
                }
            }
            if let path = credential.path {
                writer.key("path")
                writer.string(path)
            }
            writer.key("username")
            writer.string(credential.username)
            writer.key("password")
            writer.string(credential.password)
            if let passwordExpiresAt = credential.passwordExpiresAt {
                writer.key("passwordExpiresAt")
                writer.number(passwordExpiresAt)
            }
            if let oauthRefreshToken = credential.oauthRefreshToken {
                writer.key("oauthRefreshToken")
                writer.string(oauthRefreshToken)
            }
            if let authType = credential.authType, let value = credential.credential {
                writer.key("authtype")
                writer.string(authType)
                writer.key("credential")
                writer.string(value)
            }
            writer.endObject()
        }
        writer.endArray()
        writer.key("records")
        writer.beginObject()
        // Sorted, so that an unchanged payload encodes to the same bytes.
        for name in records.keys.sorted() {
            writer.key(name)
            writer.string(records[name]!)
        }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    private var estimatedEncodedSize: Int {
        var size = 64
        for entry in entries {
            let credential = entry.credential
            size +=
                192 + credential.protocolName.utf8.count + (credential.host?.server.utf8.count ?? 0)
                + (credential.path?.utf8.count ?? 0) + credential.username.utf8.count
                + credential.password.byteCount + (credential.oauthRefreshToken?.byteCount ?? 0)
                + (credential.authType?.utf8.count ?? 0) + (credential.credential?.byteCount ?? 0)
        }
        for (name, record) in records { size += 8 + name.utf8.count + record.byteCount }
        return size * 6
    }

    init() {}

    init(decoding plaintext: [UInt8]) throws(JSONError) {
        var reader = JSONReader(plaintext)
        try reader.object { reader, name throws(JSONError) in
            switch name {
            case "nextSequence":
                nextSequence = try reader.int64()
            case "credentials":
                try reader.array { reader throws(JSONError) in
                    entries.append(try Self.entry(from: &reader))
                }
            case "records":
                try reader.object { reader, name throws(JSONError) in
                    records[name] = try reader.secret()
                }
            default:
                try reader.skipValue()
            }
        }
        try reader.end()
        // A sequence number at or above nextSequence would make a later store sort below it.
        nextSequence = max(nextSequence, (entries.map(\.sequence).max() ?? 0) + 1)
    }

    private static func entry(from reader: inout JSONReader) throws(JSONError) -> Entry {
        var sequence: Int64 = 0
        var protocolName = "", server: String?, port: Int?, path: String?, username = ""
        var password = Secret(""), passwordExpiresAt: Int64?, oauthRefreshToken: Secret?
        var authType: String?, value: Secret?
        try reader.object { reader, name throws(JSONError) in
            if reader.null() { return }
            switch name {
            case "sequence": sequence = try reader.int64()
            case "protocol": protocolName = try reader.string()
            case "host": server = try reader.string()
            case "port": port = Int(try reader.int64())
            case "path": path = try reader.string()
            case "username": username = try reader.string()
            case "password": password = try reader.secret()
            case "passwordExpiresAt": passwordExpiresAt = try reader.int64()
            case "oauthRefreshToken": oauthRefreshToken = try reader.secret()
            case "authtype": authType = try reader.string()
            case "credential": value = try reader.secret()
            default: try reader.skipValue()
            }
        }
        let host = server.map { CredentialHost(server: $0, port: port) }
        return Entry(
            credential: Credential(
                protocolName: protocolName, host: host, path: path, username: username,
                password: password, passwordExpiresAt: passwordExpiresAt,
                oauthRefreshToken: oauthRefreshToken,
                // Half a pair is no credential.
                authType: value == nil ? nil : authType,
                credential: authType == nil ? nil : value),
            sequence: sequence)
    }
}
