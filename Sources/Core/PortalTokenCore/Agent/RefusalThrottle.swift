/// Which refusals a serving process writes a line for (docs/audit.md, "Refusals"), so that no
/// caller can push the lines of served requests out of the audit log, however many requests it
/// has refused: a refusal spends a token of a bucket that holds `burst` and gains one every
/// `refillMilliseconds`; one that finds it empty is counted, and the count rides on the next
/// refusal line. A refusal no caller is known for (`unnamed`: a loopback request that failed the
/// `Host` or marker check, which any local process can send) writes a line only when no such line
/// was written for `unnamedIntervalMilliseconds`. Pure: the caller gives the monotonic clock.
public struct RefusalThrottle: Sendable {
    public enum Kind: Sendable {
        /// A caller the kernel named (a Unix socket's), or one that holds the loopback credential.
        case named
        /// A loopback request that failed the `Host` or marker check.
        case unnamed
    }

    public enum Verdict: Sendable, Equatable {
        /// Write the line, with the count of refusals not written before it.
        case write(unwritten: Int)
        /// Write nothing: the refusal is counted.
        case count
    }

    public let burst: Int
    public let refillMilliseconds: Int64
    public let unnamedIntervalMilliseconds: Int64
    private var tokens: Int
    private var refilledAt: Int64?
    private var unnamedWrittenAt: Int64?
    private var unwritten = 0

    public init(burst: Int = 20, refillMilliseconds: Int64 = 6000, unnamedIntervalMilliseconds: Int64 = 60_000) {
        self.burst = burst
        self.refillMilliseconds = refillMilliseconds
        self.unnamedIntervalMilliseconds = unnamedIntervalMilliseconds
        tokens = burst
    }

    /// Decides one refusal at `now` (monotonic milliseconds).
    public mutating func admit(_ kind: Kind, at now: Int64) -> Verdict {
        if let refilledAt {
            let gained = (now - refilledAt) / refillMilliseconds
            if gained > 0 {
                tokens = min(burst, tokens + Int(clamping: gained))
                self.refilledAt = tokens == burst ? now : refilledAt + gained * refillMilliseconds
            }
        } else {
            refilledAt = now
        }
        var allowed = tokens > 0
        if kind == .unnamed, let unnamedWrittenAt, now - unnamedWrittenAt < unnamedIntervalMilliseconds {
            allowed = false
        }
        guard allowed else {
            unwritten += 1
            return .count
        }
        tokens -= 1
        if kind == .unnamed { unnamedWrittenAt = now }
        defer { unwritten = 0 }
        return .write(unwritten: unwritten)
    }
}
