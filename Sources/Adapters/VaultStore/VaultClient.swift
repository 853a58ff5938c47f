import Basics
import Glibc
import PortalTokenCore

/// One Vault or OpenBao server spoken to over its HTTP API (`/v1/...`), through the
/// `HTTPTransport` port: the token on every request (as `Authorization: Bearer`, so it is held as
/// a `Secret` and wiped by the transport), the namespace header, redirects from standby nodes
/// followed, and every answer that is not a success turned into a `StoreError` that names the
/// server and the path, never a value (docs/storage.md, "Vault / OpenBao").
final class VaultClient {
    /// What a request came back with, once redirects are followed.
    enum Outcome {
        case success(HTTPResponse)
        case notFound
        /// A write whose `cas` did not match the current version: another writer came first.
        case casConflict
    }

    /// Hops followed for one request: a standby names the active node, which answers.
    static let maximumRedirects = 3
    /// How long a new KV v2 mount may answer "upgrading" before the store gives up.
    static let upgradeRetries = 50

    let options: VaultOptions
    let transport: any HTTPTransport
    let token: VaultToken
    /// The newest storage index any answer of this run named (`X-Vault-Index`), sent with every
    /// later request: a standby that serves reads from its own copy of the data answers only
    /// once it has caught up with it, so the run reads its own writes and never goes back in
    /// time (docs/storage.md, "Vault / OpenBao").
    private(set) var consistencyIndex: (value: Int64, header: String)?
    /// The server, for messages: its host and port.
    let server: String

    init(options: VaultOptions, transport: any HTTPTransport, token: VaultToken) {
        self.options = options
        self.transport = transport
        self.token = token
        // The address without its scheme: host and port, for messages.
        var server = Substring(options.address)
        if let separator = server.firstByteRange(of: "://") { server = server[separator.upperBound...] }
        self.server = String(server)
    }

    /// Sends `method` to `/v1/<path>` with the token; a 403 is retried once with a fresh token
    /// when the token source has one (a changed agent sink, a new AppRole login). A cluster
    /// electing a new leader is waited for and the request sent again, for as long as the HTTP
    /// total timeout allows from the first attempt (docs/storage.md, "Vault / OpenBao").
    func send(_ method: String, _ path: String, body: [UInt8]? = nil) throws(StoreError) -> Outcome {
        var retries = 0
        let deadline = MonotonicClock.milliseconds() + Int64(options.http.totalTimeoutMilliseconds)
        while true {
            let bearer = try token.current(using: self)
            let response: HTTPResponse
            switch try attempt(method, path, body: body, bearer: bearer) {
            case .answered(let answer): response = answer
            case .leaderUnreachable(let error):
                try pause(before: deadline, error)
                continue
            }
            switch response.status {
            case 200..<300: return .success(response)
            case 404: return .notFound
            case 400 where Self.errors(in: response).contains { $0.firstByteRange(of: "check-and-set") != nil }:
                return .casConflict
            case 400
            where retries < Self.upgradeRetries
                && Self.errors(in: response).contains { $0.firstByteRange(of: "pgrading") != nil }:
                // A KV v2 mount just created (or upgraded from v1) refuses requests for a moment.
                retries += 1
                usleep(100_000)
                continue
            case 403:
                if retries == 0, token.renewAfterDenial(using: self) {
                    retries += 1
                    continue
                }
                throw denied(path)
            case 429 where consistencyIndex != nil:
                // A standby that has not yet caught up with the index sent: it soon will.
                try pause(before: deadline, failure(response, path: path), milliseconds: Self.catchUpPauseMilliseconds)
            case _ where Self.isLeaderChange(response):
                try pause(before: deadline, failure(response, path: path))
            default:
                throw failure(response, path: path)
            }
        }
    }

    /// Waits a moment before the next attempt while a cluster elects a leader; past the
    /// deadline, `error` is what the caller gets.
    private func pause(
        before deadline: Int64, _ error: StoreError, milliseconds: Int64 = leaderChangePauseMilliseconds
    ) throws(StoreError) {
        let remaining = deadline - MonotonicClock.milliseconds()
        guard remaining > milliseconds else { throw error }
        usleep(useconds_t(milliseconds * 1000))
    }

    /// How long to wait between attempts while a cluster has no leader.
    static let leaderChangePauseMilliseconds: Int64 = 250
    /// How long to wait for a standby to catch up with an index (it answers 429 meanwhile, and
    /// asks for a whole second, which it never needs on a healthy cluster).
    static let catchUpPauseMilliseconds: Int64 = 20

    /// An answer that says the cluster has no active node at the moment, as a standby says while
    /// a new leader is elected (503 "no active node"; 500 "local node not active but active
    /// cluster node not found", which OpenBao 2.7 answers before it forwards anything; a 5xx of a
    /// forwarding that failed), never a sealed server's, which waiting does not cure.
    static func isLeaderChange(_ response: HTTPResponse) -> Bool {
        guard [500, 502, 503, 504].contains(response.status) else { return false }
        let errors = Self.errors(in: response).map { $0.lowercased() }
        if errors.contains(where: { $0.firstByteRange(of: "sealed") != nil }) { return false }
        if response.status != 500 { return true }
        return errors.contains { error in
            ["not active", "active node", "active cluster node", "leader", "forward", "standby"].contains {
                error.firstByteRange(of: $0) != nil
            }
        }
    }

    /// What one request came to once redirects are followed.
    enum Attempt {
        case answered(HTTPResponse)
        /// The active node a standby named could not be reached: the leader has just changed.
        case leaderUnreachable(StoreError)
    }

    /// One request without the token (the AppRole login) or with the one given, redirects
    /// followed; the status is the caller's to judge.
    func exchange(_ method: String, _ path: String, body: [UInt8]?, bearer: Secret?) throws(StoreError)
        -> HTTPResponse
    {
        switch try attempt(method, path, body: body, bearer: bearer) {
        case .answered(let response): return response
        case .leaderUnreachable(let error): throw error
        }
    }

    /// One request, redirects followed.
    ///
    /// A standby node that neither serves nor forwards a request answers 307 with the active
    /// node's address. The request, token and body included, goes there only when that address
    /// is the one the cluster names as its leader (`sys/leader`, asked of the server in
    /// `VAULT_ADDR` without the token), over the same scheme (never from https down to http) and
    /// with the same path: so the token never leaves for an origin the cluster does not vouch
    /// for, and TLS is verified there as here. A leader named but not reachable (it has just
    /// died) is `leaderUnreachable`.
    func attempt(_ method: String, _ path: String, body: [UInt8]?, bearer: Secret?) throws(StoreError) -> Attempt {
        let target = "/v1/" + path
        var url = options.address + target
        var headers = [HTTPHeader("Accept", "application/json"), HTTPHeader("X-Vault-Request", "true")]
        if let body, !body.isEmpty { headers.append(HTTPHeader("Content-Type", "application/json")) }
        if let namespace = options.namespace { headers.append(HTTPHeader("X-Vault-Namespace", namespace)) }
        if let consistencyIndex { headers.append(HTTPHeader("X-Vault-Index", consistencyIndex.header)) }
        let authorization = bearer.map { token in token.withBytes { Secret(bytes: Array("Bearer ".utf8) + $0) } }
        for hop in 0...Self.maximumRedirects {
            let request = HTTPRequest(
                method: method, url: url, headers: headers, authorization: authorization, body: body)
            let response: HTTPResponse
            do {
                response = try transport.send(request)
            } catch {
                let failure = Self.storeError(error)
                if hop > 0, failure.kind == .unavailable || failure.kind == .timedOut {
                    return .leaderUnreachable(failure)
                }
                throw failure
            }
            remember(indexOf: response)
            guard [307, 308].contains(response.status) else { return .answered(response) }
            guard let location = response.headers.value(for: "Location"),
                let origin = Self.origin(of: location), location.dropFirst(origin.count) == Substring(target),
                origin.lowercased().hasPrefix("https://") || !options.address.lowercased().hasPrefix("https://"),
                !options.refusesCleartext(to: origin), try leaderOrigin() == origin.lowercased()
            else {
                throw StoreError(
                    .failed,
                    "\(server) redirected \(method) \(path) to an address the cluster does not name as its leader",
                    hint: "set VAULT_ADDR to the active node's https:// address")
            }
            url = location
        }
        throw StoreError(
            .unavailable, "\(server) redirected \(method) \(path) more than \(Self.maximumRedirects) times",
            hint: "the cluster may be electing a leader: try again in a few seconds")
    }

    /// Keeps the answer's `X-Vault-Index` when it is newer than the one kept. The header is
    /// base64 of `{"cluster": …, "value": "<index>"}`; one that does not read so is not kept.
    private func remember(indexOf response: HTTPResponse) {
        guard let header = response.headers.value(for: "X-Vault-Index"), header.utf8.count <= 512,
            let decoded = Base64.decode(header.utf8), let value = try? JSONValue.parse(decoded),
            let index = value["value"]?.stringValue.flatMap({ Int64($0) }) ?? value["value"]?.int64Value
        else { return }
        if let kept = consistencyIndex, kept.value >= index { return }
        consistencyIndex = (index, header)
    }

    /// The active node's origin as the server in `VAULT_ADDR` names it (`sys/leader`'s
    /// `leader_address`), lowercased; nil when it names none.
    func leaderOrigin() throws(StoreError) -> String? {
        let request = HTTPRequest(
            method: "GET", url: options.address + "/v1/sys/leader", headers: [HTTPHeader("Accept", "application/json")])
        let response: HTTPResponse
        do {
            response = try transport.send(request)
        } catch {
            throw Self.storeError(error)
        }
        guard response.isSuccess, let value = try? JSONValue.parse(response.body),
            let address = value["leader_address"]?.stringValue, let origin = Self.origin(of: address)
        else { return nil }
        return origin.lowercased()
    }

    /// `scheme://authority` of an absolute http or https URL.
    static func origin(of url: String) -> String? {
        let lowered = url.lowercased()
        let schemeLength: Int
        if lowered.hasPrefix("https://") {
            schemeLength = 8
        } else if lowered.hasPrefix("http://") {
            schemeLength = 7
        } else {
            return nil
        }
        let rest = url.utf8.dropFirst(schemeLength)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        let authority = String(decoding: rest[..<(end ?? rest.endIndex)], as: UTF8.self)
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        return String(url.prefix(schemeLength)) + authority
    }

    /// A 403: the token's policy refuses the path, or the token is no longer valid. Which one is
    /// asked of the server (`auth/token/lookup-self`), so the hint says what to fix.
    func denied(_ path: String) -> StoreError {
        let tokenValid: Bool
        if let bearer = try? token.current(using: self),
            let response = try? exchange("GET", "auth/token/lookup-self", body: nil, bearer: bearer)
        {
            tokenValid = response.status != 403
        } else {
            tokenValid = true
        }
        if !tokenValid {
            return StoreError(
                .failed, "\(server) refused the Vault token: it is expired, revoked or unknown (\(token.origin))",
                hint: "log in again (bao login / vault login), or check the agent that writes the token file")
        }
        return StoreError(
            .failed, "permission denied by policy for \(path) on \(server)",
            hint: "grant the token's policy the capabilities storage.md (installed in share/doc/portal-token/) lists "
                + "for \(options.mount)/")
    }

    func failure(_ response: HTTPResponse, path: String) -> StoreError {
        let detail = Self.errors(in: response).first.map { ": " + TerminalText.escaped(String($0.prefix(200))) }
        switch response.status {
        case 503:
            return StoreError(
                .unavailable, "\(server) is sealed or has no active node (HTTP 503)",
                hint: "unseal it, or wait for the cluster to elect a leader, and try again")
        case 429, 500..<600:
            return StoreError(.unavailable, "\(server) answered HTTP \(response.status) for \(path)\(detail ?? "")")
        default:
            return StoreError(.failed, "\(server) answered HTTP \(response.status) for \(path)\(detail ?? "")")
        }
    }

    /// The `errors` list of an error answer. Vault's errors name paths and reasons, never a
    /// stored value.
    static func errors(in response: HTTPResponse) -> [String] {
        guard let value = try? JSONValue.parse(response.body), let errors = value["errors"]?.arrayValue else {
            return []
        }
        return errors.compactMap(\.stringValue)
    }

    static func storeError(_ error: HTTPError) -> StoreError {
        switch error {
        case .connectTimedOut, .timedOut:
            return StoreError(.timedOut, "the Vault store: \(error.message)", hint: "check VAULT_ADDR and the network")
        case .cannotConnect:
            return StoreError(.unavailable, "the Vault store: \(error.message)", hint: "check VAULT_ADDR")
        case .tlsFailure:
            return StoreError(
                .unavailable, "the Vault store: \(error.message)",
                hint: "point VAULT_CACERT at the CA certificate that signed the server's")
        case .caBundleUnreadable(let path):
            return StoreError(
                .failed, "the Vault store: the CA file \(path) could not be read", hint: "check VAULT_CACERT")
        default:
            return StoreError(.failed, "the Vault store: \(error.message)")
        }
    }
}

extension VaultClient {
    /// A JSON body with the writer's bytes; the caller wipes it after the request.
    static func body(_ write: (inout JSONWriter) -> Void) -> [UInt8] {
        var writer = JSONWriter()
        write(&writer)
        return writer.bytes
    }
}
