import Basics

/// What portal-token remembers of a sign-in grant it exchanged: a digest, never the grant.
///
/// The digest is HMAC-SHA-256 of the grant, keyed by a fixed label and the auth environment ID
/// (`"portal-token grant digest v1" NUL <environment>`), written as 64 lowercase hex digits. A
/// grant is a long random single-use value, so nobody can get it back from its digest or confirm
/// a guess; the key is not secret, and serves to keep the digests of one environment apart from
/// another's and from any other use of SHA-256. The same grant always gives the same digest, so
/// a new process can tell that a redirect delivered again is one it already exchanged (wire
/// contract §5.2, across processes).
public enum GrantDigest {
    static let label = "portal-token grant digest v1"

    /// The digest of `grant` in `authEnvironmentID`.
    public static func of(_ grant: Secret, authEnvironmentID: String) -> String {
        hex(grant.withBytes { HMACSHA256.authenticate(Array($0), key: key(authEnvironmentID)) })
    }

    /// A short, stable tag for the environment, for names that must not show the environment
    /// verbatim or grow with it (kernel keyring descriptions).
    public static func environmentTag(_ authEnvironmentID: String) -> String {
        String(hex(HMACSHA256.authenticate(Array(authEnvironmentID.utf8), key: Array((label + " environment").utf8))).prefix(16))
    }

    static func key(_ authEnvironmentID: String) -> [UInt8] {
        Array(label.utf8) + [0] + Array(authEnvironmentID.utf8)
    }

    public static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
}

/// HMAC (RFC 2104) over SHA-256.
enum HMACSHA256 {
    static func authenticate(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        var block = key.count > SHA256.blockLength ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: SHA256.blockLength - block.count)
        defer { zeroize(&block) }
        var inner = block.map { $0 ^ 0x36 } + message
        defer { zeroize(&inner) }
        let innerDigest = SHA256.hash(inner)
        return SHA256.hash(block.map { $0 ^ 0x5c } + innerDigest)
    }
}

/// SHA-256 (FIPS 180-4). Small, and only on the sign-in path: the toolchain offers no hash to
/// the pure core, and the digest needs no more than this.
enum SHA256 {
    static let blockLength = 64

    private static let roundConstants: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    static func hash(_ message: [UInt8]) -> [UInt8] {
        var state: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
        var padded = message
        defer { zeroize(&padded) }
        padded.append(0x80)
        while padded.count % blockLength != 56 { padded.append(0) }
        let bitLength = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        var schedule = [UInt32](repeating: 0, count: 64)
        for blockStart in stride(from: 0, to: padded.count, by: blockLength) {
            for index in 0..<16 {
                let offset = blockStart + index * 4
                schedule[index] = UInt32(padded[offset]) << 24 | UInt32(padded[offset + 1]) << 16
                    | UInt32(padded[offset + 2]) << 8 | UInt32(padded[offset + 3])
            }
            for index in 16..<64 {
                let s0 = rotate(schedule[index - 15], 7) ^ rotate(schedule[index - 15], 18) ^ (schedule[index - 15] >> 3)
                let s1 = rotate(schedule[index - 2], 17) ^ rotate(schedule[index - 2], 19) ^ (schedule[index - 2] >> 10)
                schedule[index] = schedule[index - 16] &+ s0 &+ schedule[index - 7] &+ s1
            }
            var a = state[0], b = state[1], c = state[2], d = state[3]
            var e = state[4], f = state[5], g = state[6], h = state[7]
            for index in 0..<64 {
                let s1 = rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)
                let choice = (e & f) ^ (~e & g)
                let temporary1 = h &+ s1 &+ choice &+ roundConstants[index] &+ schedule[index]
                let s0 = rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let temporary2 = s0 &+ majority
                h = g; g = f; f = e; e = d &+ temporary1
                d = c; c = b; b = a; a = temporary1 &+ temporary2
            }
            state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
            state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
        }
        for index in schedule.indices { schedule[index] = 0 }
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for word in state {
            digest += [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)]
        }
        return digest
    }

    private static func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 {
        (value >> count) | (value << (32 - count))
    }
}
