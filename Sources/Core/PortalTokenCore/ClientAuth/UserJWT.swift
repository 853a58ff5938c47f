import Basics

/// Reading the end user out of the short-lived two-factor token (docs/portal-api.md, "The two-factor token").
///
/// `POST /totps/validations` answers without an `endUserId`, so the session's end user comes
/// from the `userJwt`'s claims, read before the network call: a token that cannot name its end
/// user never costs the user a live code. The signature is not verified (Portal does that);
/// only the claims segment is read.
public enum UserJWT {
    /// Why a `userJwt` was refused; each has a fixed text that never repeats the token.
    public enum Problem: String, Error, Sendable, Hashable, CaseIterable {
        case malformed
        case notBase64URL
        case unreadableClaims
        case missingEndUserID

        public var detail: String {
            switch self {
            case .malformed: return "it is not a JWT"
            case .notBase64URL: return "its claims are not base64url"
            case .unreadableClaims: return "its claims are not a JSON object"
            case .missingEndUserID: return "its claims name no endUserId"
            }
        }
    }

    /// The `endUserId` claim: a string that is not blank. Numbers, booleans and the rest are
    /// refused, never turned into text.
    public static func endUserID(in userJWT: Secret) throws(ClientAuthError) -> String {
        let result: Result<String, Problem> = userJWT.withBytes { bytes in claimsEndUserID(bytes) }
        switch result {
        case .success(let endUserID): return endUserID
        case .failure(let problem): throw .invalidUserJWT(problem)
        }
    }

    static func claimsEndUserID(_ token: UnsafeRawBufferPointer) -> Result<String, Problem> {
        // Split on `.` keeping empty pieces: only the second piece matters, so find its bounds.
        guard let firstDot = token.firstIndex(of: UInt8(ascii: ".")) else { return .failure(.malformed) }
        let claimsStart = firstDot + 1
        let claimsEnd = token[claimsStart...].firstIndex(of: UInt8(ascii: ".")) ?? token.endIndex
        guard let claims = Base64.decode(token[claimsStart..<claimsEnd]) else { return .failure(.notBase64URL) }
        guard let value = try? JSONValue.parse(claims), case .object = value else { return .failure(.unreadableClaims) }
        guard let endUserID = value["endUserId"]?.stringValue, !endUserID.isBlank else {
            return .failure(.missingEndUserID)
        }
        return .success(endUserID)
    }
}
