import Basics

/// Who asked for a credential, as the kernel tells it (docs/audit.md, "Fields"). For a command run
/// directly, the writing process and its ancestors; through the agent, the peer of its socket.
/// Every field is optional: a fact that could not be read is left out, never guessed.
public struct AuditCaller: Sendable, Equatable {
    public var pid: Int32?
    public var uid: UInt32?
    public var gid: UInt32?
    /// The inode number of the caller's user namespace (`/proc/PID/ns/user`).
    public var userNamespace: UInt64?
    /// The caller's executable (`/proc/PID/exe`), or its name in parentheses when that cannot be read.
    public var executable: String?
    /// The executables of its parent, grandparent and so on, nearest first, up to
    /// `maximumParents`, stopping before pid 1.
    public var parents: [String]
    /// The Docker or Podman container the caller runs in, from its cgroup.
    public var containerID: String?
    /// The Flatpak application, from the scope systemd made for it.
    public var flatpakAppID: String?
    /// The systemd unit, from its cgroup.
    public var systemdUnit: String?
    /// The socket the request came in on, when it came through the agent.
    public var socket: String?

    public static let maximumParents = 8

    public init(
        pid: Int32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, userNamespace: UInt64? = nil,
        executable: String? = nil, parents: [String] = [], containerID: String? = nil, flatpakAppID: String? = nil,
        systemdUnit: String? = nil, socket: String? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.userNamespace = userNamespace
        self.executable = executable
        self.parents = parents
        self.containerID = containerID
        self.flatpakAppID = flatpakAppID
        self.systemdUnit = systemdUnit
        self.socket = socket
    }
}

/// What was asked for: the command (or the agent's endpoint for it) by its name.
public enum AuditOperation: String, Sendable, CaseIterable {
    case get, store, erase, token, exec
    case execCredential = "exec-credential"
    case dockerGet = "docker-get", dockerStore = "docker-store", dockerErase = "docker-erase"
    case dockerList = "docker-list"
    case api, refresh, login, redirect
    case verifyTOTP = "verify-totp"
    case logout
    /// A request the proxy forwarded to Portal or refused by its checks.
    case proxy
}

/// How it ended (docs/audit.md, "Outcomes").
public enum AuditOutcome: String, Sendable, CaseIterable {
    /// A credential or the token was handed out, or a request carrying it was answered.
    case served
    case stored, erased
    case signedIn = "signed-in", signedOut = "signed-out"
    /// A sign-in is waiting for its two-factor step.
    case pending
    /// No credential matched.
    case notFound = "not-found"
    case notSignedIn = "not-signed-in"
    /// Refused by a rule of the agent, or by a check of the proxy.
    case refused
    /// The keyring or the file store was locked.
    case locked
    /// The session reached its 7-day cap.
    case expired
    /// git reported the token rejected (an erase carrying it): the session ended.
    case invalidated
    /// Portal answered 401 to the token: the session ended.
    case unauthorized
    /// Portal refused the request otherwise (exit 6).
    case rejected
    /// Portal could not be reached (exit 5).
    case unreachable
    /// Anything else: a storage, usage or internal error.
    case failed
}

/// One credential event: a line of the audit log once written (docs/audit.md). It never holds a
/// password or a command line; the token, when there is one, is only ever fingerprinted.
public struct AuditEvent: Sendable {
    /// Nanoseconds since the epoch; nil: when it is written.
    public var time: Int64?
    public var operation: AuditOperation
    public var outcome: AuditOutcome
    /// The exit code of the command, when a command ran.
    public var exitCode: Int32?
    /// nil: the process that writes the line.
    public var caller: AuditCaller?
    public var authEnvironmentID: String?
    public var endUserID: String?
    /// The session token that was used, fingerprinted when written, never written itself.
    public var token: Secret?
    /// For a credential-protocol or Docker request: the protocol and host (never the path or
    /// the username).
    public var protocolName: String?
    public var host: String?
    /// For a request to Portal: the method and the status Portal answered.
    public var method: String?
    public var httpStatus: Int?
    /// For `exec`: the name of the program the token was handed to, without its directory or arguments.
    public var program: String?
    /// Whether this event ended the session (and so ran the on-session-invalidated hook): true
    /// for the one use, across every process, whose compare-and-delete removed it.
    public var endedSession: Bool
    /// On a refusal's line: the refusals this process wrote no line for since its previous
    /// refusal line (`RefusalThrottle`).
    public var unwrittenRefusals: Int?
    /// On a proxied request's line: the delegated credential's chain of ids, the root's first
    /// (never the credential).
    public var delegation: [String]

    public init(
        operation: AuditOperation, outcome: AuditOutcome, time: Int64? = nil, exitCode: Int32? = nil,
        caller: AuditCaller? = nil, authEnvironmentID: String? = nil, endUserID: String? = nil, token: Secret? = nil,
        protocolName: String? = nil, host: String? = nil, method: String? = nil, httpStatus: Int? = nil,
        program: String? = nil, endedSession: Bool = false, unwrittenRefusals: Int? = nil, delegation: [String] = []
    ) {
        self.operation = operation
        self.outcome = outcome
        self.time = time
        self.exitCode = exitCode
        self.caller = caller
        self.authEnvironmentID = authEnvironmentID
        self.endUserID = endUserID
        self.token = token
        self.protocolName = protocolName
        self.host = host
        self.method = method
        self.httpStatus = httpStatus
        self.program = program
        self.endedSession = endedSession
        self.unwrittenRefusals = unwrittenRefusals
        self.delegation = delegation
    }

    /// The longest a text field is written: what is longer is cut, so a line stays one short write.
    public static let maximumFieldLength = 256

    /// The line as written: one JSON object and a newline, keys in a fixed order
    /// (docs/audit.schema.json). `time` and `caller` are the ones to write (the event's own, or
    /// the writer's clock and process); `fingerprint` is the token's, made with the writer's key.
    public func line(time: Int64, caller: AuditCaller, fingerprint: String?) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("time")
        writer.string(AuditTime.format(nanoseconds: time))
        writer.key("operation")
        writer.string(operation.rawValue)
        writer.key("outcome")
        writer.string(outcome.rawValue)
        if let exitCode {
            writer.key("exitCode")
            writer.number(Int64(exitCode))
        }
        Self.text("authEnvironmentId", authEnvironmentID, to: &writer)
        Self.text("endUserId", endUserID.flatMap(Self.unlessEmailLike), to: &writer)
        if let fingerprint {
            writer.key("tokenFingerprint")
            writer.string(fingerprint)
        }
        if endedSession {
            writer.key("endedSession")
            writer.bool(true)
        }
        Self.text("protocol", protocolName, to: &writer)
        Self.text("host", host.map(Self.withoutUserInfo), to: &writer)
        Self.text("method", method, to: &writer)
        if let httpStatus {
            writer.key("httpStatus")
            writer.number(Int64(httpStatus))
        }
        Self.text("program", program, to: &writer)
        if let unwrittenRefusals, unwrittenRefusals > 0 {
            writer.key("unwrittenRefusals")
            writer.number(Int64(unwrittenRefusals))
        }
        if !delegation.isEmpty {
            writer.key("delegation")
            writer.beginArray()
            for id in delegation.prefix(DelegatedCredential.maximumLines) { writer.string(id) }
            writer.endArray()
        }
        writer.key("caller")
        caller.write(to: &writer)
        writer.endObject()
        return writer.bytes + [UInt8(ascii: "\n")]
    }

    private static func text(_ key: String, _ value: String?, to writer: inout JSONWriter) {
        guard let value, !value.isEmpty else { return }
        writer.key(key)
        writer.string(String(value.unicodeScalars.prefix(maximumFieldLength)))
    }

    /// An end-user ID that looks like an email address is left out: the log never holds one
    /// (docs/audit.md, "What is never written").
    static func unlessEmailLike(_ value: String) -> String? { value.utf8.contains(UInt8(ascii: "@")) ? nil : value }

    /// A host as git's `url=` gives it never carries user information, but a Docker server URL
    /// typed by hand may: only what follows the last `@` is kept.
    static func withoutUserInfo(_ host: String) -> String {
        guard let at = host.lastIndex(of: "@") else { return host }
        return String(host[host.index(after: at)...])
    }
}

extension AuditCaller {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        if let pid {
            writer.key("pid")
            writer.number(Int64(pid))
        }
        if let uid {
            writer.key("uid")
            writer.number(Int64(uid))
        }
        if let gid {
            writer.key("gid")
            writer.number(Int64(gid))
        }
        if let userNamespace {
            writer.key("userNamespace")
            writer.number(String(userNamespace))
        }
        let limit = AuditEvent.maximumFieldLength
        if let executable {
            writer.key("executable")
            writer.string(String(executable.unicodeScalars.prefix(limit)))
        }
        writer.key("parents")
        writer.beginArray()
        for parent in parents.prefix(Self.maximumParents) { writer.string(String(parent.unicodeScalars.prefix(limit))) }
        writer.endArray()
        for (key, value) in [
            ("containerId", containerID), ("flatpakAppId", flatpakAppID), ("systemdUnit", systemdUnit),
            ("socket", socket),
        ] {
            if let value, !value.isEmpty {
                writer.key(key)
                writer.string(String(value.unicodeScalars.prefix(limit)))
            }
        }
        writer.endObject()
    }
}

/// The token's fingerprint (docs/audit.md, "The token fingerprint"): HMAC-SHA-256 under the
/// user's own audit key, its first 8 bytes in hex. Equal for every use of one token, different for
/// the next sign-in's, and of no use for finding the token without the key.
public enum AuditFingerprint {
    public static let keyBytes = 32
    public static let hexLength = 16

    public static func of(_ token: Secret, key: [UInt8]) -> String {
        var message = token.withBytes { Array($0) }
        defer { zeroize(&message) }
        // Byte by byte (this runs on every `token`; the generic encoder costs more than the HMAC).
        var text: [UInt8] = []
        text.reserveCapacity(hexLength)
        for byte in Sodium.hmacSHA256(message, key: key).prefix(hexLength / 2) {
            Hex.appendDigits(of: byte, to: &text)
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// The log's times: RFC 3339 in UTC with microseconds, `2026-12-01T17:20:03.123456Z`.
public enum AuditTime {
    public static func format(nanoseconds: Int64) -> String {
        let seconds = nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds + 1) / 1_000_000_000 - 1
        let microseconds = (nanoseconds - seconds * 1_000_000_000) / 1000
        var text = RFC3339.format(seconds)
        text.removeLast()
        let digits = String(microseconds)
        return text + "." + String(repeating: "0", count: 6 - digits.count) + digits + "Z"
    }

    /// Seconds since the epoch of an RFC 3339 UTC time, with or without a fraction (which is
    /// dropped); nil for anything else. The whole seconds are `RFC3339.parse`'s.
    public static func seconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count > 20 else { return RFC3339.parse(text) }
        // `.`, the fraction's digits, then the `Z`.
        guard bytes[19] == UInt8(ascii: "."), bytes.last == UInt8(ascii: "Z"),
            bytes[20..<(bytes.count - 1)].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return RFC3339.parse(String(decoding: bytes[0..<19] + [UInt8(ascii: "Z")], as: UTF8.self))
    }
}

/// `--since`'s durations: a whole number and a unit, `90s`, `30m`, `24h`, `7d`.
public enum AuditDuration {
    public static func seconds(_ text: String) -> Int64? {
        guard let unit = text.last, let count = Int64(text.dropLast()), count >= 0, count <= 100 * 365 * 86400 else {
            return nil
        }
        switch unit {
        case "s": return count
        case "m": return count * 60
        case "h": return count * 3600
        case "d": return count * 86400
        default: return nil
        }
    }
}

/// Where credential events are written: the audit log (docs/audit.md). Recording never fails
/// the caller: a log that cannot be written is reported once per process, on stderr, by the log.
public protocol AuditLog: AnyObject {
    func record(_ event: AuditEvent)
    /// The lines kept, oldest first (the rotated file's, then the current file's); empty when
    /// there is no log yet.
    func lines() throws(AuditLogError) -> [String]
}

/// Why the audit log could not be read.
public struct AuditLogError: Error, Sendable, Equatable {
    public var message: String
    public var hint: String?

    public init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }
}

/// A log that records nothing: the log turned off in the user's config file.
public final class NoAuditLog: AuditLog {
    public init() {}
    public func record(_ event: AuditEvent) {}
    public func lines() throws(AuditLogError) -> [String] { [] }
}
