import Basics
import Glibc
import PortalTokenCore

/// The item store over KV version 2 of an OpenBao or HashiCorp Vault server (docs/storage.md,
/// "Vault / OpenBao").
///
/// Layout, under the mount (`secret` unless set) and the path prefix (`portal-token`):
/// - an item lives at `<prefix>/<schema>/<SHA-256 of its attributes, in hex>`: its identity is its
///   attribute set, as in the Secret Service, so the same item written twice lands on one path,
///   and the path says nothing of the secret;
/// - the key's `custom_metadata` holds the attributes (as one JSON text, so no value is empty),
///   which is what a search filters on without reading any secret; `max_versions` is 1, so no
///   older secret stays readable in the key's history;
/// - the current version's data holds the attributes again (they are what is trusted), the label
///   and the secret.
///
/// Every write is a check-and-set against the version it read (0 to create), so a write based
/// on what another host has since changed fails and is read again rather than overwriting it.
/// Removing an item writes a tombstone version (data without a secret) with check-and-set: of two
/// hosts removing one item, exactly one succeeds, which is what lets exactly one host run the
/// on-session-invalidated hook. The tombstone stays as the key's one version; storing the same
/// item again reuses the path.
///
/// Times: `created` is when the key was first written, `modified` when its current version was;
/// both are the server's clock, so items written by different hosts order alike.
public final class VaultItemStore: ItemStore {
    let client: VaultClient
    let options: VaultOptions

    /// An item found, with where it lives and the version it was read at.
    struct Found {
        var item: StoredItem
        /// Under the mount: `<prefix>/<schema>/<hash>`.
        var path: String
        var version: Int64
        var order: (Int64, Int64)
    }

    /// A key's metadata: the attributes its custom metadata names, when readable.
    struct Metadata {
        var attributes: ItemAttributes?
        var currentVersion: Int64
        var createdAt: Int64?
    }

    /// How many times a write or removal reads again after another writer came first.
    static let maximumConflicts = 12

    /// Waits before reading again after a lost check-and-set: 10 ms, doubling to 200 ms, with
    /// jitter. A standby answers reads from its own copy of the data, a moment behind the leader
    /// that refused the write; read again at once, it would still show the version that lost.
    static func backOff(after conflicts: Int) {
        let milliseconds = min(10 << min(conflicts, 5), 200)
        usleep(useconds_t((milliseconds / 2 + Int.random(in: 0...(milliseconds / 2))) * 1000))
    }

    /// Vault refuses a custom metadata value longer than this.
    static let customMetadataValueLimit = 512

    /// - Parameter loginCache: where an AppRole login's token is kept for the runs that follow
    ///   (the kernel keyring), nil to log in once per run.
    public init(
        options: VaultOptions, transport: any HTTPTransport, environment: @escaping (String) -> String?,
        monotonicNow: @escaping () -> Int64, loginCache: VaultLoginCache? = nil
    ) {
        self.options = options
        let token = VaultToken(
            options.token, environment: environment, monotonicNow: monotonicNow,
            loginCache: loginCache, loginCacheName: VaultToken.loginCacheName(options))
        self.client = VaultClient(options: options, transport: transport, token: token)
    }

    // MARK: ItemStore

    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        try found(filters).map(\.item)
    }

    /// The check and the write are one check-and-set write against the version of the item
    /// checked: when the newest item lives at the path `item` is written to (the same attributes,
    /// as a session re-stored with its own token), no host can change or remove it between the
    /// check and the write. A lost check-and-set reads again and checks again.
    @discardableResult
    public func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        let path = path(for: item.attributes)
        for conflicts in 0..<Self.maximumConflicts {
            if conflicts > 0 { Self.backOff(after: conflicts - 1) }
            let matching = try found(filters)
            let newest = matching.first
            guard condition(newest?.item) else { return false }
            let version: Int64
            let metadata: Metadata?
            if let newest, newest.path == path {
                version = newest.version
                metadata = nil
            } else {
                metadata = try readMetadata(path)
                version = metadata?.currentVersion ?? 0
            }
            guard
                try write(
                    item, at: path, over: version, writingMetadata: newest?.path != path && metadata?.attributes == nil)
            else { continue }
            for old in matching where old.path != path && isPrevious(old.item) {
                _ = try remove(old) { $0.matches(any: filters) && isPrevious($0) }
            }
            return true
        }
        throw conflicted(path)
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        var removed = 0
        for doomed in try found(filters) where isDoomed(doomed.item) {
            if try remove(doomed, while: { $0.matches(any: filters) && isDoomed($0) }) { removed += 1 }
        }
        return removed
    }

    /// One request when the item last seen newest is still there: its key's data read again
    /// (the current version, whatever host wrote it), and used when it is still live and still
    /// matches. A removal there (a tombstone), or an item that no longer matches, means another
    /// host changed the slot: the listing is searched as usual.
    public func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem? {
        if id.hasPrefix(options.pathPrefix + "/"), let found = try read(id, createdAt: nil),
            found.item.matches(any: filters)
        {
            return found.item
        }
        return try search(filters).first
    }

    // MARK: Paths

    /// An item's path under the mount, from its attributes alone.
    func path(for attributes: ItemAttributes) -> String {
        let schema = attributes[StoredItem.schemaAttribute] ?? ""
        var canonical = Array(JSONValue.object(attributes.mapValues { .string($0) }).serialized.utf8)
        let digest = Sodium.sha256(canonical)
        zeroize(&canonical)
        return directory(schema) + "/" + Hex.encode(digest)
    }

    /// The directory of a schema's items. A schema of plain characters is its own name; any
    /// other is spelled in hex, so no path segment is ever ambiguous.
    func directory(_ schema: String) -> String {
        let plain =
            !schema.isEmpty && schema != "." && schema != ".."
            && schema.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            }
        return options.pathPrefix + "/" + (plain ? schema : "x-" + Hex.encode(Array(schema.utf8)))
    }

    func data(_ path: String) -> String { options.mount + "/data/" + path }
    func metadata(_ path: String) -> String { options.mount + "/metadata/" + path }

    // MARK: Reading

    /// The live items matching any of `filters`, each once, newest first.
    func found(_ filters: [ItemAttributes]) throws(StoreError) -> [Found] {
        var bySchema: [String: [ItemAttributes]] = [:]
        for filter in filters { bySchema[filter[StoredItem.schemaAttribute] ?? "", default: []].append(filter) }
        var result: [Found] = []
        for (schema, schemaFilters) in bySchema.sorted(by: { $0.key < $1.key }) {
            let directory = directory(schema)
            for key in try list(directory) {
                let path = directory + "/" + key
                guard let metadata = try readMetadata(path), metadata.currentVersion > 0 else { continue }
                if let attributes = metadata.attributes,
                    !schemaFilters.contains(where: { filter in filter.allSatisfy { attributes[$0.key] == $0.value } })
                {
                    continue
                }
                guard let item = try read(path, createdAt: metadata.createdAt), item.item.matches(any: schemaFilters)
                else { continue }
                result.append(item)
            }
        }
        return result.sorted { $0.order > $1.order }
    }

    /// The keys of a directory; none when it does not exist.
    func list(_ directory: String) throws(StoreError) -> [String] {
        guard case .success(let response) = try client.send("LIST", metadata(directory) + "/") else { return [] }
        guard let value = try? JSONValue.parse(response.body), let keys = value["data"]?["keys"]?.arrayValue else {
            throw StoreError(
                .failed, "\(client.server) answered a listing of \(options.mount)/\(directory) that is not JSON")
        }
        return keys.compactMap(\.stringValue).filter { !$0.hasSuffix("/") }
    }

    func readMetadata(_ path: String) throws(StoreError) -> Metadata? {
        guard case .success(let response) = try client.send("GET", metadata(path)) else { return nil }
        guard let value = try? JSONValue.parse(response.body), let data = value["data"] else {
            throw StoreError(.failed, "\(client.server) answered metadata of \(options.mount)/\(path) that is not JSON")
        }
        var attributes: ItemAttributes?
        if let text = data["custom_metadata"]?["attributes"]?.stringValue,
            case .object(let members) = try? JSONValue.parse(text)
        {
            attributes = members.compactMapValues(\.stringValue)
        }
        return Metadata(
            attributes: attributes, currentVersion: data["current_version"]?.int64Value ?? 0,
            createdAt: data["created_time"]?.stringValue.flatMap(VaultTime.parse)?.seconds)
    }

    /// The item at `path` now, or nil when there is none (never written, or a tombstone).
    func read(_ path: String, createdAt: Int64?) throws(StoreError) -> Found? {
        guard case .success(var response) = try client.send("GET", data(path)) else { return nil }
        defer { zeroize(&response.body) }
        let entry: VaultEntry
        do {
            entry = try VaultEntry.read(response.body)
        } catch {
            throw StoreError(.failed, "\(client.server) answered \(options.mount)/\(path) with data that is not JSON")
        }
        guard let secret = entry.secret, let attributes = entry.attributes else { return nil }
        let written = entry.createdTime.flatMap(VaultTime.parse)
        let item = StoredItem(
            attributes: attributes, label: entry.label ?? "", secret: secret, created: createdAt ?? written?.seconds,
            modified: written?.seconds, sequence: written?.nanoseconds ?? 0, id: path)
        return Found(item: item, path: path, version: entry.version, order: (written?.nanoseconds ?? 0, entry.version))
    }

    // MARK: Writing

    /// Writes `item` at `path` with check-and-set against `version` (0: no version yet); false
    /// when another writer came first.
    func write(
        _ item: StoredItem, at path: String, over version: Int64, writingMetadata: Bool
    ) throws(StoreError) -> Bool {
        if writingMetadata { try writeMetadata(path, attributes: item.attributes) }
        var body = VaultClient.body { writer in
            writer.beginObject()
            writer.key("data")
            VaultEntry.write(item, to: &writer)
            writer.key("options")
            writer.beginObject()
            writer.key("cas")
            writer.number(version)
            writer.endObject()
            writer.endObject()
        }
        defer { zeroize(&body) }
        switch try client.send("POST", data(path), body: body) {
        case .success: return true
        case .casConflict: return false
        case .notFound: throw StoreError(.failed, "\(client.server) has no KV version 2 mount at \(options.mount)/")
        }
    }

    /// The key's settings: one version kept, and the attributes a search filters on.
    func writeMetadata(_ path: String, attributes: ItemAttributes) throws(StoreError) {
        let text = JSONValue.object(attributes.mapValues { .string($0) }).serialized
        let body = VaultClient.body { writer in
            writer.beginObject()
            writer.key("max_versions")
            writer.number(1)
            // A text too long for Vault's custom metadata is left out: searches then read the
            // attributes from the data.
            if text.utf8.count <= Self.customMetadataValueLimit {
                writer.key("custom_metadata")
                writer.beginObject()
                writer.key("attributes")
                writer.string(text)
                writer.endObject()
            }
            writer.endObject()
        }
        if case .notFound = try client.send("POST", metadata(path), body: body) {
            throw StoreError(.failed, "\(client.server) has no KV version 2 mount at \(options.mount)/")
        }
    }

    /// Replaces the version `found` was read at with a tombstone. When another writer changed
    /// the item first, it is read again and removed only if `stillDoomed` accepts what is there
    /// now. True when this call removed it.
    func remove(_ found: Found, while stillDoomed: (StoredItem) -> Bool) throws(StoreError) -> Bool {
        var version = found.version
        for conflicts in 0..<Self.maximumConflicts {
            let body = VaultClient.body { writer in
                writer.beginObject()
                writer.key("data")
                writer.beginObject()
                writer.key("removed")
                writer.string("true")
                writer.endObject()
                writer.key("options")
                writer.beginObject()
                writer.key("cas")
                writer.number(version)
                writer.endObject()
                writer.endObject()
            }
            switch try client.send("POST", data(found.path), body: body) {
            case .success: return true
            case .notFound: return false
            case .casConflict:
                Self.backOff(after: conflicts)
                guard let now = try read(found.path, createdAt: nil), stillDoomed(now.item) else { return false }
                version = now.version
            }
        }
        throw conflicted(found.path)
    }

    func conflicted(_ path: String) -> StoreError {
        StoreError(
            .failed, "\(options.mount)/\(path) on \(client.server) kept changing while it was written",
            hint: "another host is writing the same item: try again")
    }
}

/// The data of one version: the item's attributes, label and secret, or a tombstone.
struct VaultEntry {
    var attributes: ItemAttributes?
    var label: String?
    var secret: Secret?
    var version: Int64 = 0
    var createdTime: String?

    static func write(_ item: StoredItem, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("attributes")
        JSONValue.object(item.attributes.mapValues { .string($0) }).write(to: &writer)
        writer.key("label")
        writer.string(item.label)
        writer.key("secret")
        writer.string(item.secret)
        writer.endObject()
    }

    /// A `GET <mount>/data/<path>` answer; the secret is read straight into a `Secret`.
    static func read(_ body: [UInt8]) throws(JSONError) -> VaultEntry {
        var entry = VaultEntry()
        var reader = JSONReader(body)
        try reader.object { reader, key throws(JSONError) in
            guard key == "data", !reader.null() else { return try reader.skipValue() }
            try reader.object { reader, key throws(JSONError) in
                switch key {
                case "data" where !reader.null():
                    try reader.object { reader, key throws(JSONError) in
                        switch key {
                        case "attributes":
                            guard case .object(let members) = try reader.value() else { throw JSONError(offset: 0) }
                            entry.attributes = members.compactMapValues(\.stringValue)
                        case "label": entry.label = try reader.string()
                        case "secret": entry.secret = try reader.secret()
                        default: try reader.skipValue()
                        }
                    }
                case "metadata" where !reader.null():
                    try reader.object { reader, key throws(JSONError) in
                        switch key {
                        case "version": entry.version = try reader.int64()
                        case "created_time": entry.createdTime = try reader.string()
                        default: try reader.skipValue()
                        }
                    }
                default: try reader.skipValue()
                }
            }
        }
        try reader.end()
        return entry
    }
}

/// Vault's times: RFC 3339 in UTC, `2024-05-01T12:34:56.123456789Z`.
enum VaultTime {
    static func parse(_ text: String) -> (seconds: Int64, nanoseconds: Int64)? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= bytes.count, !range.isEmpty else { return nil }
            var value: Int64 = 0
            for byte in bytes[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var index = 19
        var fraction: Int64 = 0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                if digits < 9 { fraction = fraction * 10 + Int64(bytes[index] - 0x30) }
                digits += 1
                index += 1
            }
            for _ in digits..<max(digits, 9) { fraction *= 10 }
        }
        var offset: Int64 = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
            let hours = number((index + 1)..<(index + 3)), let minutes = number((index + 4)..<(index + 6))
        {
            offset = (hours * 3600 + minutes * 60) * (bytes[index] == UInt8(ascii: "+") ? 1 : -1)
        } else if index >= bytes.count || bytes[index] != UInt8(ascii: "Z") {
            return nil
        }
        // Days from the civil date (the proleptic Gregorian calendar).
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return (seconds, seconds * 1_000_000_000 + fraction)
    }
}
