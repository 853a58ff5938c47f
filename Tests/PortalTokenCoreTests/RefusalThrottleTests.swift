import PortalTokenCore
import Testing

@Suite("the throttle on refusal lines")
struct RefusalThrottleTests {
    @Test("a burst is written, the rest counted; the count rides on the next line once a token comes back")
    func burstThenCount() {
        var throttle = RefusalThrottle(burst: 3, refillMilliseconds: 1000)
        let verdicts = (0..<10).map { _ in throttle.admit(.named, at: 0) }
        #expect(verdicts == Array(repeating: .write(unwritten: 0), count: 3) + Array(repeating: .count, count: 7))
        #expect(throttle.admit(.named, at: 999) == .count)
        #expect(throttle.admit(.named, at: 1000) == .write(unwritten: 8))
        #expect(throttle.admit(.named, at: 1001) == .count)
        // Tokens come back up to the burst, never past it.
        #expect(throttle.admit(.named, at: 100_000) == .write(unwritten: 1))
        #expect(throttle.admit(.named, at: 100_000) == .write(unwritten: 0))
        #expect(throttle.admit(.named, at: 100_000) == .write(unwritten: 0))
        #expect(throttle.admit(.named, at: 100_000) == .count)
    }

    @Test("a refusal no caller is known for writes at most one line an interval")
    func unnamedOncePerInterval() {
        var throttle = RefusalThrottle(burst: 20, refillMilliseconds: 1000, unnamedIntervalMilliseconds: 60_000)
        #expect(throttle.admit(.unnamed, at: 0) == .write(unwritten: 0))
        for time in stride(from: Int64(1), to: 60_000, by: 100) {
            #expect(throttle.admit(.unnamed, at: time) == .count)
        }
        // A named refusal in between is written, with the unnamed ones counted before it.
        #expect(throttle.admit(.named, at: 59_999) == .write(unwritten: 600))
        #expect(throttle.admit(.unnamed, at: 60_000) == .write(unwritten: 0))
    }

    @Test("an hour of a flood writes at most the burst and one line a refill")
    func hourOfFlood() {
        var throttle = RefusalThrottle()
        var written = 0
        for time in stride(from: Int64(0), to: 3_600_000, by: 10) {
            if case .write = throttle.admit(time % 20 == 0 ? .named : .unnamed, at: time) { written += 1 }
        }
        #expect(written <= throttle.burst + 3_600_000 / Int(throttle.refillMilliseconds))
        #expect(written >= 3_600_000 / Int(throttle.refillMilliseconds))
    }
}
