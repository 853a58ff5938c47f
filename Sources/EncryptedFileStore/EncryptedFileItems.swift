import PortalTokenCore

/// The item-store port on the encrypted file: each item is a named record beside the git
/// credentials, named after its schema and attributes, holding its secret
/// (`item:<schema>?<name>=<value>&…`, names and values percent-encoded, attributes sorted).
/// Portal sessions and two-factor steps live here through the same codecs as in the keyring.
///
/// The first payload format kept them as `portal-session:<environment>` and
/// `portal-two-factor:<environment>` records: those read as items, and become item records with
/// the next write of any kind. A portal-token that predates items keeps item records it does
/// not know when it rewrites the file, so going back loses nothing (it does not see them).
extension EncryptedFileStore: ItemStore {
    public func search(schema: String, attributes: [String: String]) throws(StoreError) -> [StoredItem] {
        var payload = try read()
        _ = payload.upgradeLegacyRecords()
        return payload.records.keys.sorted().compactMap { name -> StoredItem? in
            guard let (itemSchema, itemAttributes) = ItemRecordName.parse(name), itemSchema == schema,
                attributes.allSatisfy({ itemAttributes[$0.key] == $0.value })
            else { return nil }
            return StoredItem(schema: schema, attributes: itemAttributes, label: "", secret: payload.records[name]!)
        }
    }

    public func replace(matching key: [String: String], with item: StoredItem) throws(StoreError) {
        try modify { payload in
            payload.removeItems(schema: item.schema, matching: key)
            payload.records[ItemRecordName.make(schema: item.schema, attributes: item.attributes)] = item.secret
            return true
        }
    }

    @discardableResult
    public func delete(schema: String, attributes: [String: String]) throws(StoreError) -> Int {
        var removed = 0
        try modify { payload in
            removed = payload.removeItems(schema: schema, matching: attributes)
            return removed > 0
        }
        return removed
    }
}

extension StorePayload {
    /// Removes the item records of `schema` whose attributes include all of `attributes`.
    @discardableResult
    mutating func removeItems(schema: String, matching attributes: [String: String]) -> Int {
        let doomed = records.keys.filter { name in
            guard let (itemSchema, itemAttributes) = ItemRecordName.parse(name) else { return false }
            return itemSchema == schema && attributes.allSatisfy { itemAttributes[$0.key] == $0.value }
        }
        for name in doomed { records[name] = nil }
        return doomed.count
    }

    /// Turns the first format's session and two-factor records into item records; returns
    /// whether there were any.
    mutating func upgradeLegacyRecords() -> Bool {
        var upgraded = false
        for name in Array(records.keys) {
            guard let secret = records[name], let (schema, attributes) = Self.legacyItem(name, secret) else { continue }
            records[name] = nil
            records[ItemRecordName.make(schema: schema, attributes: attributes)] = secret
            upgraded = true
        }
        return upgraded
    }

    private static func legacyItem(_ name: String, _ secret: Secret) -> (String, [String: String])? {
        if name.hasPrefix("portal-session:") {
            let environment = String(name.dropFirst("portal-session:".count))
            // The end user is in the payload; one that does not decode reads as unreadable.
            let endUser = PortalSession.decode(payload: secret, authEnvironmentID: environment)?.endUserID ?? ""
            return (ItemSessionStore.schema, ["auth-environment-id": environment, "end-user-id": endUser])
        }
        if name.hasPrefix("portal-two-factor:") {
            return (
                ItemTwoFactorStepStore.schema,
                ["auth-environment-id": String(name.dropFirst("portal-two-factor:".count))]
            )
        }
        return nil
    }
}

/// `item:<schema>?<name>=<value>&…`: the record name of an item, which is its whole identity.
enum ItemRecordName {
    static let prefix = "item:"

    static func make(schema: String, attributes: [String: String]) -> String {
        prefix + encode(schema) + "?"
            + attributes.sorted { $0.key < $1.key }
            .map { encode($0.key) + "=" + encode($0.value) }.joined(separator: "&")
    }

    static func parse(_ name: String) -> (schema: String, attributes: [String: String])? {
        guard name.hasPrefix(prefix), let question = name.firstIndex(of: "?") else { return nil }
        guard let schema = decode(name[name.index(name.startIndex, offsetBy: prefix.count)..<question]) else {
            return nil
        }
        var attributes: [String: String] = [:]
        let query = name[name.index(after: question)...]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let key = decode(parts[0]), let value = decode(parts[1]) else { return nil }
            attributes[key] = value
        }
        return (schema, attributes)
    }

    /// Percent-encodes every byte but unreserved ones (RFC 3986), so `?`, `&`, `=` and `%` in a
    /// schema, name or value never split it.
    private static func encode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            let character = Character(Unicode.Scalar(byte))
            if byte < 0x80, character.isLetter || character.isNumber || "-._~:".contains(character) {
                result.append(character)
            } else {
                let digits = String(byte, radix: 16, uppercase: true)
                result += "%" + (digits.count == 1 ? "0" : "") + digits
            }
        }
        return result
    }

    private static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var index = text.utf8.startIndex
        let utf8 = text.utf8
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                guard first != utf8.endIndex, utf8.index(after: first) != utf8.endIndex,
                    let value = UInt8(
                        String(decoding: utf8[first...utf8.index(after: first)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                index = utf8.index(first, offsetBy: 2)
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
