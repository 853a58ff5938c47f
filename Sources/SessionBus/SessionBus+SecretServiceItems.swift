import Basics
import CSDBus
import Glibc
import PortalTokenCore

/// The everyday read of the Secret Service, over the sd-bus connection this run already holds
/// for the `auto` decision and the lock check: no libsecret, no GLib, no second connection
/// (docs/storage.md, "Reading without libsecret").
///
/// Two exchanges with the provider, each a few calls sent at once and answered together:
///
/// 1. `ReadAlias("default")`, `OpenSession("plain")` (the secrets' transfer session, once per
///    connection; why `plain`: docs/storage.md, "The transfer session: `plain`"), and
///    `Service.SearchItems` with the attributes asked for;
/// 2. the default collection's `Locked` property, `GetSecrets` of every unlocked item found,
///    and each found item's properties (attributes, label, times).
///
/// Six calls to the provider for one item, where git's C helper makes six too (and fourteen
/// more to the bus daemon). Only libsecret runs an unlock prompt, so the answer is nil, and the
/// caller asks `unlockDefaultCollectionWithoutPrompt` before libsecret reads, whenever a lock is
/// in the way: the default collection is locked (some providers then
/// answer a search with nothing at all, which is not "nothing stored"), or has no alias, or an
/// item found is locked. A provider error other than "no provider" or a timeout is left to
/// libsecret too, which knows how to tell a vanished item from a failure.
extension SessionBus {
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    public func unlockedSecretServiceItems(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem]? {
        let operation = "reading the keyring"
        let searches = Self.searches(for: filters)
        guard !searches.isEmpty else { return [] }

        var first = [
            try newCall(Self.secretServicePath, Self.serviceInterface, "ReadAlias") { call in
                call.append("s", "default")
            }
        ]
        let opensSession = secretTransferSession == nil
        if opensSession {
            first.append(
                try newCall(Self.secretServicePath, Self.serviceInterface, "OpenSession") { call in
                    call.append("s", "plain")
                    call.container("v", "s") { call.append("s", "") }
                })
        }
        for attributes in searches {
            first.append(
                try newCall(Self.secretServicePath, Self.serviceInterface, "SearchItems") { call in
                    call.container("a", "{ss}") {
                        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
                            call.container("e", "ss") {
                                call.append("s", name)
                                call.append("s", value)
                            }
                        }
                    }
                })
        }
        let answered: [Reply]?
        do {
            answered = try callAll(
                first, withinMilliseconds: KeyringBound.searchMilliseconds(of: timeoutMilliseconds), while: operation)
        } catch  where error.kind == .timedOut {
            throw lockedInsteadOfTimeout(error)
        }
        guard let firstReplies = answered else { return nil }
        let collection = try readObjectPath(firstReplies[0])
        if opensSession { secretTransferSession = try readObjectPath(firstReplies[1], skippingFirst: "v") }
        guard collection != "/", let session = secretTransferSession else { return nil }
        var unlocked: [String] = []
        for reply in firstReplies[(opensSession ? 2 : 1)...] {
            let (found, locked) = try readSearchResult(reply)
            guard locked.isEmpty else { return nil }
            for path in found where !unlocked.contains(path) { unlocked.append(path) }
        }

        var second = [
            try newCall(collection, Self.propertiesInterface, "Get") { call in
                call.append("s", "org.freedesktop.Secret.Collection")
                call.append("s", "Locked")
            }
        ]
        if !unlocked.isEmpty {
            second.append(
                try newCall(Self.secretServicePath, Self.serviceInterface, "GetSecrets") { call in
                    call.container("a", "o") { for path in unlocked { call.append("o", path) } }
                    call.append("o", session)
                })
            for path in unlocked {
                second.append(
                    try newCall(path, Self.propertiesInterface, "GetAll") { call in
                        call.append("s", "org.freedesktop.Secret.Item")
                    })
            }
        }
        guard let secondReplies = try callAll(second, while: operation) else {
            // The session may be what failed (a provider that restarted); the next read opens another.
            secretTransferSession = nil
            return nil
        }
        guard try !readLocked(secondReplies[0]) else { return nil }
        guard !unlocked.isEmpty else { return [] }
        let secrets = try readSecrets(secondReplies[1])
        var items: [StoredItem] = []
        for (index, path) in unlocked.enumerated() {
            let properties = try readItemProperties(secondReplies[2 + index])
            guard !properties.locked, let secret = secrets[path] else { return nil }
            let item = StoredItem(
                storedAttributes: properties.attributes, label: properties.label, secret: secret,
                created: properties.created, modified: properties.modified, id: path)
            if item.matches(any: filters) { items.append(item) }
        }
        return items.sorted(by: StoredItem.isListedBefore)
    }

    /// `Service.Unlock` on the default collection, within the bound; the prompt it may answer
    /// with is never run here (only libsecret prompts, and only where a prompt is allowed).
    /// True when the provider unlocked it with no prompt (`SecretServiceProvider.noPrompt`).
    public func unlockDefaultCollectionWithoutPrompt() throws(StoreError) -> Bool {
        let operation = "unlocking the keyring"
        let alias = [
            try newCall(Self.secretServicePath, Self.serviceInterface, "ReadAlias") { call in
                call.append("s", "default")
            }
        ]
        guard let aliased = try callAll(alias, while: operation) else { return false }
        let collection = try readObjectPath(aliased[0])
        guard collection != "/" else { return false }
        let unlock = [
            try newCall(Self.secretServicePath, Self.serviceInterface, "Unlock") { call in
                call.container("a", "o") { call.append("o", collection) }
            }
        ]
        let answered: [Reply]?
        do {
            answered = try callAll(unlock, while: operation)
        } catch  where error.kind == .timedOut {
            // A provider that holds Unlock is showing its own dialog: that is still "locked".
            return false
        }
        guard let reply = answered?.first else { return false }
        let unlocked = try readObjectPaths(reply.message)
        let prompt = try readObjectPath(reply)
        return prompt == SecretServiceProvider.noPrompt && unlocked.contains(collection)
    }

    /// A search that ran out of time on a locked collection is "locked": KeePassXC (with "Unlock
    /// before search", its default) answers a search in a locked database only once a person
    /// unlocks it in the dialog it shows, and answers other calls meanwhile, so whether the
    /// default collection is locked is asked within the rest of the bound (`KeyringBound`: a
    /// stalled provider costs one bound in all); when it is not, the timeout stands.
    private func lockedInsteadOfTimeout(_ timeout: StoreError) -> StoreError {
        let rest = KeyringBound.lockCheckMilliseconds(of: timeoutMilliseconds)
        guard (try? isDefaultCollectionLocked(withinMilliseconds: rest)) == true else { return timeout }
        return .lockedWhileSearchHeld("the default keyring", timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The attribute sets to search for: one search when the filters differ only in their schema
    /// (git's credentials, under two schema names), matched against each filter afterwards, as
    /// git's own helper searches without the schema; else one search per filter.
    static func searches(for filters: [ItemAttributes]) -> [ItemAttributes] {
        var common = filters.first ?? [:]
        common[StoredItem.schemaAttribute] = nil
        let sameButSchema = filters.allSatisfy {
            var attributes = $0
            attributes[StoredItem.schemaAttribute] = nil
            return attributes == common
        }
        if sameButSchema, !common.isEmpty { return [common] }
        var searches: [ItemAttributes] = []
        for filter in filters where !searches.contains(filter) { searches.append(filter) }
        return searches
    }

    // MARK: Building calls

    /// A method call to the Secret Service provider, its arguments appended by `arguments`.
    private func newCall(
        _ path: String, _ interface: String, _ member: String, arguments: (CallArguments) -> Void
    ) throws(StoreError) -> MethodCall {
        var message: OpaquePointer?
        let created = sd.messageNewMethodCall(bus, &message, Self.secretServiceName, path, interface, member)
        guard created >= 0, let message else {
            throw StoreError(
                .failed, "the session bus failed while building a call: \(String(cString: strerror(-created)))")
        }
        let call = MethodCall(message, sd: sd)
        let builder = CallArguments(message, sd: sd)
        arguments(builder)
        guard !builder.failed else {
            throw StoreError(.failed, "the session bus failed while building a call to \(member)")
        }
        return call
    }

    // MARK: Calling

    /// Sends every call at once and waits for all the replies, within the bound. nil when the
    /// provider answered any of them with an error, or the connection failed, in a way that
    /// libsecret should see for itself (and name: no bus, a vanished item).
    private func callAll(
        _ calls: [MethodCall], withinMilliseconds milliseconds: Int? = nil, while operation: String
    ) throws(StoreError) -> [Reply]? {
        let pending = calls.map { _ in PendingReply() }
        var slots: [OpaquePointer?] = []
        // Releasing a slot cancels its callback: nothing is left to call into freed memory, and
        // each callback's PendingReply lives until then.
        defer {
            for slot in slots { _ = sd.slotUnref(slot) }
            withExtendedLifetime(pending) {}
        }
        let usec = UInt64(max(milliseconds ?? timeoutMilliseconds, 1)) * 1000
        for (call, reply) in zip(calls, pending) {
            var slot: OpaquePointer?
            let sent = sd.callAsync(
                bus, &slot, call.message, sessionBusReplyHandler, Unmanaged.passUnretained(reply).toOpaque(), usec)
            guard sent >= 0 else { return nil }
            slots.append(slot)
        }
        let deadline = MonotonicClock.nanoseconds() + Int64(usec) * 1000
        while pending.contains(where: { $0.message == nil }) {
            let processed = sd.process(bus, nil)
            guard processed >= 0 else { return nil }
            if processed > 0 { continue }
            let now = MonotonicClock.nanoseconds()
            guard now < deadline else { throw failure(-ETIMEDOUT, while: operation) }
            let waited = sd.wait(bus, UInt64(deadline - now) / 1000)
            guard waited >= 0 || -waited == EINTR else { return nil }
        }
        var replies: [Reply] = []
        for reply in pending {
            let message = Reply(reply.message!, sd: sd)
            reply.message = nil
            if let error = sd.messageGetError(message.message) {
                let name = error.pointee.name.map { String(cString: $0) } ?? ""
                if name == "org.freedesktop.DBus.Error.NoReply" || name == "org.freedesktop.DBus.Error.Timeout" {
                    throw failure(-ETIMEDOUT, while: operation)
                }
                if name == "org.freedesktop.DBus.Error.ServiceUnknown"
                    || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
                {
                    try check(-EHOSTDOWN, operation, error: error.pointee)
                }
                return nil
            }
            replies.append(message)
        }
        return replies
    }

    private func failure(_ result: Int32, while operation: String) -> StoreError {
        do {
            try check(result, operation)
        } catch {
            return error
        }
        return StoreError(.failed, "the session bus failed while \(operation)")
    }

    // MARK: Reading replies

    private func readFailure() -> StoreError {
        StoreError(.failed, "the Secret Service sent an answer that could not be read")
    }

    private func readObjectPath(_ reply: Reply, skippingFirst skipped: String? = nil) throws(StoreError) -> String {
        if let skipped, sd.messageSkip(reply.message, skipped) < 0 { throw readFailure() }
        var path: UnsafePointer<CChar>?
        guard sd.messageReadBasic(reply.message, CChar(UInt8(ascii: "o")), &path) > 0, let path else {
            throw readFailure()
        }
        return String(cString: path)
    }

    private func readObjectPaths(_ message: OpaquePointer) throws(StoreError) -> [String] {
        guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "a")), "o") > 0 else { throw readFailure() }
        var paths: [String] = []
        while true {
            var path: UnsafePointer<CChar>?
            let read = sd.messageReadBasic(message, CChar(UInt8(ascii: "o")), &path)
            guard read >= 0 else { throw readFailure() }
            guard read > 0, let path else { break }
            paths.append(String(cString: path))
        }
        guard sd.messageExitContainer(message) >= 0 else { throw readFailure() }
        return paths
    }

    /// `SearchItems`' answer: the unlocked items and the locked ones.
    private func readSearchResult(_ reply: Reply) throws(StoreError) -> (unlocked: [String], locked: [String]) {
        (try readObjectPaths(reply.message), try readObjectPaths(reply.message))
    }

    /// A `Properties.Get` answer holding a boolean.
    private func readLocked(_ reply: Reply) throws(StoreError) -> Bool {
        guard sd.messageEnterContainer(reply.message, CChar(UInt8(ascii: "v")), "b") > 0 else { throw readFailure() }
        var value: Int32 = 0
        guard sd.messageReadBasic(reply.message, CChar(UInt8(ascii: "b")), &value) > 0 else { throw readFailure() }
        return value != 0
    }

    /// `GetSecrets`' answer, `a{o(oayays)}`, in a `plain` session: each item's secret is the
    /// value's bytes. The bytes are wiped in the reply once copied.
    private func readSecrets(_ reply: Reply) throws(StoreError) -> [String: Secret] {
        let message = reply.message
        guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "a")), "{o(oayays)}") > 0 else {
            throw readFailure()
        }
        var secrets: [String: Secret] = [:]
        while true {
            let entered = sd.messageEnterContainer(message, CChar(UInt8(ascii: "e")), "o(oayays)")
            guard entered >= 0 else { throw readFailure() }
            if entered == 0 { break }
            var path: UnsafePointer<CChar>?
            guard sd.messageReadBasic(message, CChar(UInt8(ascii: "o")), &path) > 0, let path else {
                throw readFailure()
            }
            guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "r")), "oayays") > 0,
                sd.messageSkip(message, "oay") >= 0
            else { throw readFailure() }
            var bytes: UnsafeRawPointer?
            var count = 0
            guard sd.messageReadArray(message, CChar(UInt8(ascii: "y")), &bytes, &count) >= 0 else {
                throw readFailure()
            }
            let value = count > 0 && bytes != nil ? Array(UnsafeRawBufferPointer(start: bytes, count: count)) : []
            // The reply is this process's own copy, freed when `reply` goes; nothing reads it after.
            if let bytes, count > 0 { explicit_bzero(UnsafeMutableRawPointer(mutating: bytes), count) }
            secrets[String(cString: path)] = Secret(bytes: value)
            guard sd.messageSkip(message, "s") >= 0, sd.messageExitContainer(message) >= 0,
                sd.messageExitContainer(message) >= 0
            else { throw readFailure() }
        }
        return secrets
    }

    private struct ItemProperties {
        var attributes: ItemAttributes = [:]
        var label = ""
        var locked = true
        var created: Int64? = 0
        var modified: Int64? = 0
    }

    /// `Properties.GetAll` of an item, `a{sv}`.
    private func readItemProperties(_ reply: Reply) throws(StoreError) -> ItemProperties {
        let message = reply.message
        var properties = ItemProperties()
        guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "a")), "{sv}") > 0 else { throw readFailure() }
        while true {
            let entered = sd.messageEnterContainer(message, CChar(UInt8(ascii: "e")), "sv")
            guard entered >= 0 else { throw readFailure() }
            if entered == 0 { break }
            var name: UnsafePointer<CChar>?
            guard sd.messageReadBasic(message, CChar(UInt8(ascii: "s")), &name) > 0, let name else {
                throw readFailure()
            }
            switch String(cString: name) {
            case "Attributes":
                guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "v")), "a{ss}") > 0,
                    sd.messageEnterContainer(message, CChar(UInt8(ascii: "a")), "{ss}") > 0
                else { throw readFailure() }
                while true {
                    let pair = sd.messageEnterContainer(message, CChar(UInt8(ascii: "e")), "ss")
                    guard pair >= 0 else { throw readFailure() }
                    if pair == 0 { break }
                    var key: UnsafePointer<CChar>?
                    var value: UnsafePointer<CChar>?
                    guard sd.messageReadBasic(message, CChar(UInt8(ascii: "s")), &key) > 0,
                        sd.messageReadBasic(message, CChar(UInt8(ascii: "s")), &value) > 0, let key, let value,
                        sd.messageExitContainer(message) >= 0
                    else { throw readFailure() }
                    properties.attributes[String(cString: key)] = String(cString: value)
                }
                guard sd.messageExitContainer(message) >= 0, sd.messageExitContainer(message) >= 0 else {
                    throw readFailure()
                }
            case "Label":
                var label: UnsafePointer<CChar>?
                guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "v")), "s") > 0,
                    sd.messageReadBasic(message, CChar(UInt8(ascii: "s")), &label) > 0, let label,
                    sd.messageExitContainer(message) >= 0
                else { throw readFailure() }
                properties.label = String(cString: label)
            case "Locked":
                var locked: Int32 = 1
                guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "v")), "b") > 0,
                    sd.messageReadBasic(message, CChar(UInt8(ascii: "b")), &locked) > 0,
                    sd.messageExitContainer(message) >= 0
                else { throw readFailure() }
                properties.locked = locked != 0
            case "Created", "Modified":
                let isCreated = String(cString: name) == "Created"
                var seconds: UInt64 = 0
                guard sd.messageEnterContainer(message, CChar(UInt8(ascii: "v")), "t") > 0,
                    sd.messageReadBasic(message, CChar(UInt8(ascii: "t")), &seconds) > 0,
                    sd.messageExitContainer(message) >= 0
                else { throw readFailure() }
                if isCreated {
                    properties.created = Int64(clamping: seconds)
                } else {
                    properties.modified = Int64(clamping: seconds)
                }
            default:
                guard sd.messageSkip(message, "v") >= 0 else { throw readFailure() }
            }
            guard sd.messageExitContainer(message) >= 0 else { throw readFailure() }
        }
        return properties
    }
}

/// Appends a call's arguments; a failure is remembered, and the call is not sent.
private final class CallArguments {
    private let message: OpaquePointer
    private let sd: SDBus
    private(set) var failed = false

    init(_ message: OpaquePointer, sd: SDBus) {
        self.message = message
        self.sd = sd
    }

    func append(_ type: Character, _ value: String) {
        let appended = value.withCString { sd.messageAppendBasic(message, CChar(type.asciiValue!), $0) }
        if appended < 0 { failed = true }
    }

    func container(_ type: Character, _ contents: String, _ body: () -> Void) {
        guard sd.messageOpenContainer(message, CChar(type.asciiValue!), contents) >= 0 else {
            failed = true
            return
        }
        body()
        if sd.messageCloseContainer(message) < 0 { failed = true }
    }
}

/// A message this side holds a reference to (a method call built and not yet sent, or a reply
/// received); the reference is released with it.
private final class OwnedMessage {
    let message: OpaquePointer
    private let sd: SDBus
    init(_ message: OpaquePointer, sd: SDBus) {
        self.message = message
        self.sd = sd
    }
    deinit { _ = sd.messageUnref(message) }
}

/// A method call built and not yet sent.
private typealias MethodCall = OwnedMessage
/// A reply received.
private typealias Reply = OwnedMessage

/// Where a reply lands when it comes: the handler keeps a reference to it.
private final class PendingReply {
    var message: OpaquePointer?
    deinit { if let message { _ = SDBus.loaded?.messageUnref(message) } }
}

/// Called by sd-bus, inside `sd_bus_process`, with each reply (or the error it made up when
/// the bound passed); `userdata` is the call's `PendingReply`, alive until its slot is released.
private let sessionBusReplyHandler: sd_bus_message_handler_t = { message, userdata, _ in
    guard let userdata, let sd = SDBus.loaded else { return 0 }
    let pending = Unmanaged<PendingReply>.fromOpaque(userdata).takeUnretainedValue()
    pending.message = sd.messageRef(message)
    return 0
}
