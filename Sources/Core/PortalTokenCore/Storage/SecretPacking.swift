/// How git-credential-libsecret packs the extra attributes into one secret: the password on the
/// first line, then `password_expiry_utc=` and `oauth_refresh_token=` lines. portal-token adds
/// `authtype=` and `credential=` lines (git 2.46+), which git's helper skips as it skips every
/// line it does not know; a bearer-only credential has an empty first line. Unknown lines are
/// ignored here too, so items written by newer helpers still read.
public enum SecretPacking {
    public struct Unpacked: Sendable {
        public var password: Secret
        public var passwordExpiresAt: Int64?
        public var oauthRefreshToken: Secret?
        public var authType: String?
        public var credential: Secret?
    }

    public static func pack(password: Secret, passwordExpiresAt: Int64?, oauthRefreshToken: Secret?) -> Secret {
        pack(
            Credential(
                protocolName: "", host: nil, username: "", password: password,
                passwordExpiresAt: passwordExpiresAt, oauthRefreshToken: oauthRefreshToken))
    }

    public static func pack(_ credential: Credential) -> Secret {
        var bytes: [UInt8] = []
        credential.password.withBytes { bytes.append(contentsOf: $0) }
        if let passwordExpiresAt = credential.passwordExpiresAt {
            bytes.append(contentsOf: "\npassword_expiry_utc=\(passwordExpiresAt)".utf8)
        }
        if let oauthRefreshToken = credential.oauthRefreshToken {
            bytes.append(contentsOf: "\noauth_refresh_token=".utf8)
            oauthRefreshToken.withBytes { bytes.append(contentsOf: $0) }
        }
        if let authType = credential.authType, let value = credential.credential {
            bytes.append(contentsOf: "\nauthtype=\(authType)\ncredential=".utf8)
            value.withBytes { bytes.append(contentsOf: $0) }
        }
        let secret = Secret(bytes: bytes)
        zeroize(&bytes)
        return secret
    }

    public static func unpack(_ packed: Secret) -> Unpacked {
        packed.withBytes { raw in
            let lines = raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            var result = Unpacked(password: Secret(bytes: lines.first.map { Array($0) } ?? []))
            for line in lines.dropFirst() {
                if let value = value(of: line, after: "password_expiry_utc=") {
                    result.passwordExpiresAt = Int64(String(decoding: value, as: UTF8.self))
                } else if let value = value(of: line, after: "oauth_refresh_token=") {
                    result.oauthRefreshToken = Secret(bytes: Array(value))
                } else if let value = value(of: line, after: "authtype=") {
                    result.authType = String(decoding: value, as: UTF8.self)
                } else if let value = value(of: line, after: "credential=") {
                    result.credential = Secret(bytes: Array(value))
                }
            }
            // Half a pair is no credential.
            if result.authType == nil || result.credential == nil {
                result.authType = nil
                result.credential = nil
            }
            return result
        }
    }

    private static func value(of line: UnsafeRawBufferPointer.SubSequence, after prefix: String)
        -> UnsafeRawBufferPointer.SubSequence?
    {
        let prefixBytes = Array(prefix.utf8)
        guard line.count >= prefixBytes.count, line.prefix(prefixBytes.count).elementsEqual(prefixBytes) else {
            return nil
        }
        return line.dropFirst(prefixBytes.count)
    }
}

extension SecretPacking.Unpacked {
    init(password: Secret) {
        self.password = password
        passwordExpiresAt = nil
        oauthRefreshToken = nil
        authType = nil
        credential = nil
    }

    /// Fills the secret fields of `credential` (read from an item's attributes).
    public func apply(to credential: inout Credential) {
        credential.password = password
        credential.passwordExpiresAt = passwordExpiresAt
        credential.oauthRefreshToken = oauthRefreshToken
        credential.authType = authType
        credential.credential = self.credential
    }
}
