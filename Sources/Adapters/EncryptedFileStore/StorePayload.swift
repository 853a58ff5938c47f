import Basics
import PortalTokenCore

/// What the store file holds once decrypted: one list of items, the same items the Secret
/// Service keeps (git credentials, Portal sessions, two-factor steps), secrets included
/// (docs/file-format.md).
///
/// As JSON:
///
///     {"nextSequence": 3,
///      "items": [{"sequence": 2, "created": 1767225600, "modified": 1767225600,
///                 "label": "Git: https:∕∕example.com∕",
///                 "attributes": {"xdg:schema": "org.git.Password", "protocol": "https", …},
///                 "secret": "…"}]}
///
/// Earlier files kept git credentials in `credentials[]` and the rest in `records{}`; they read
/// as the same items, and are written in this shape by the next write (`isUpgraded`). Unknown
/// members are skipped when reading, so a newer writer's additions do not break it.
struct StorePayload: Equatable {
    /// Newest last; `sequence` orders them.
    var items: [StoredItem] = []
    var nextSequence: Int64 = 1
    /// Read from an earlier layout: the next write rewrites it as items.
    var isUpgraded = false

    static let empty = StorePayload()

    /// Appends `item` as the newest, stamped with the next sequence number and `now`.
    mutating func append(_ item: StoredItem, at now: Int64) {
        var item = item
        item.sequence = nextSequence
        item.created = now
        item.modified = now
        item.id = ""
        nextSequence += 1
        items.append(item)
    }

    // MARK: JSON

    /// The plaintext; the caller zeroes it once it is encrypted.
    func encoded() -> [UInt8] {
        var writer = JSONWriter()
        // Room for the worst case up front (every byte escaped as \u00XX), so that growing the
        // buffer never leaves an unwiped copy of a secret behind.
        writer.bytes.reserveCapacity(estimatedEncodedSize)
        writer.beginObject()
        writer.key("nextSequence")
        writer.number(nextSequence)
        writer.key("items")
        writer.beginArray()
        for item in items {
            writer.beginObject()
            writer.key("sequence")
            writer.number(item.sequence)
            if let created = item.created {
                writer.key("created")
                writer.number(created)
            }
            if let modified = item.modified {
                writer.key("modified")
                writer.number(modified)
            }
            writer.key("label")
            writer.string(item.label)
            writer.key("attributes")
            writer.beginObject()
            // Sorted, so that an unchanged payload encodes to the same bytes.
            for name in item.attributes.keys.sorted() {
                writer.key(name)
                writer.string(item.attributes[name]!)
            }
            writer.endObject()
            writer.key("secret")
            writer.string(item.secret)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    private var estimatedEncodedSize: Int {
        var size = 64
        for item in items {
            size += 128 + item.label.utf8.count + item.secret.byteCount
            for (name, value) in item.attributes { size += 8 + name.utf8.count + value.utf8.count }
        }
        return size * 6
    }

    init() {}

    init(decoding plaintext: [UInt8]) throws(JSONError) {
        var reader = JSONReader(plaintext)
        try reader.object { reader, name throws(JSONError) in
            switch name {
            case "nextSequence":
                nextSequence = try reader.int64()
            case "items":
                try reader.array { reader throws(JSONError) in items.append(try Self.item(from: &reader)) }
            case "credentials":
                isUpgraded = true
                try reader.array { reader throws(JSONError) in
                    let (credential, sequence) = try Self.credential(from: &reader)
                    var item = CredentialItems.item(for: credential)
                    item.sequence = sequence
                    items.append(item)
                }
            case "records":
                isUpgraded = true
                try reader.object { reader, name throws(JSONError) in
                    items.append(Self.recordItem(name, try reader.secret()))
                }
            default:
                try reader.skipValue()
            }
        }
        try reader.end()
        // Records had no sequence of their own: they follow the credentials, in name order.
        for index in items.indices where items[index].sequence == 0 {
            nextSequence = max(nextSequence, (items.map(\.sequence).max() ?? 0) + 1)
            items[index].sequence = nextSequence
        }
        // A sequence number at or above nextSequence would make a later store sort below it.
        nextSequence = max(nextSequence, (items.map(\.sequence).max() ?? 0) + 1)
        items.sort { $0.sequence < $1.sequence }
    }

    private static func item(from reader: inout JSONReader) throws(JSONError) -> StoredItem {
        var item = StoredItem(attributes: [:], label: "", secret: Secret(""))
        try reader.object { reader, name throws(JSONError) in
            if reader.null() { return }
            switch name {
            case "sequence": item.sequence = try reader.int64()
            case "created": item.created = try reader.int64()
            case "modified": item.modified = try reader.int64()
            case "label": item.label = try reader.string()
            case "secret": item.secret = try reader.secret()
            case "attributes":
                try reader.object { reader, name throws(JSONError) in item.attributes[name] = try reader.string() }
            default: try reader.skipValue()
            }
        }
        return item
    }

    /// A git credential of the earlier layout's `credentials[]`, with its sequence number.
    private static func credential(from reader: inout JSONReader) throws(JSONError) -> (Credential, Int64) {
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
        let credential = Credential(
            protocolName: protocolName, host: server.map { CredentialHost(server: $0, port: port) }, path: path,
            username: username, password: password, passwordExpiresAt: passwordExpiresAt,
            oauthRefreshToken: oauthRefreshToken,
            // Half a pair is no credential.
            authType: value == nil ? nil : authType, credential: authType == nil ? nil : value)
        return (credential, sequence)
    }

    /// The schema a record of the earlier layout gets when its name is none of the known ones.
    static let recordSchema = "io.portalhq.PortalToken.Record"

    /// An item of the earlier layout's `records{}`: `portal-session:<environment>`,
    /// `portal-two-factor:<environment>`, or `item:<schema>?<attribute>=<value>&…` (percent-encoded).
    private static func recordItem(_ name: String, _ secret: Secret) -> StoredItem {
        var attributes: ItemAttributes
        if name.hasPrefix("portal-session:") {
            let environment = String(name.dropFirst("portal-session:".count))
            // The end user is in the payload; one that does not decode reads as unreadable.
            let endUser = PortalSession.decode(payload: secret, authEnvironmentID: environment)?.endUserID ?? ""
            attributes = [
                StoredItem.schemaAttribute: SessionItems.schema, "auth-environment-id": environment,
                "end-user-id": endUser,
            ]
        } else if name.hasPrefix("portal-two-factor:") {
            attributes = [
                StoredItem.schemaAttribute: TwoFactorStepItems.schema,
                "auth-environment-id": String(name.dropFirst("portal-two-factor:".count)),
            ]
        } else if name.hasPrefix("item:"), let question = name.firstIndex(of: "?"),
            let schema = decoded(name[name.index(name.startIndex, offsetBy: 5)..<question])
        {
            attributes = [StoredItem.schemaAttribute: schema]
            for pair in name[name.index(after: question)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, let key = decoded(parts[0]), let value = decoded(parts[1]) else {
                    return StoredItem(
                        attributes: [StoredItem.schemaAttribute: recordSchema, "name": name], label: "", secret: secret)
                }
                attributes[key] = value
            }
        } else {
            // No build wrote other names; one that appears is kept, not lost.
            attributes = [StoredItem.schemaAttribute: recordSchema, "name": name]
        }
        return StoredItem(attributes: attributes, label: "", secret: secret)
    }

    private static func decoded(_ text: Substring) -> String? {
        PercentCoding.decodeStrictly(ArraySlice(text.utf8)).flatMap { String(validating: $0, as: UTF8.self) }
    }
}
