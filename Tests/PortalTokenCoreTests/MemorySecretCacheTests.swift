import PortalTokenCore
import Synchronization
import Testing

@Suite("the agent's memory cache")
struct MemorySecretCacheTests {
    final class Clock: Sendable {
        let milliseconds = Mutex<Int64>(1_000_000)
        func advance(seconds: Int64) { milliseconds.withLock { $0 += seconds * 1000 } }
        var now: @Sendable () -> Int64 { { self.milliseconds.withLock { $0 } } }
    }

    @Test("an entry lives its idle time after each read, and never past its maximum")
    func timeouts() {
        let clock = Clock()
        let cache = MemorySecretCache(now: clock.now)
        cache.store(Secret("key"), as: "portal-token:file-key:x", idleSeconds: 10, maximumSeconds: 25)
        clock.advance(seconds: 9)
        #expect(cache.read("portal-token:file-key:x") == Secret("key"))
        clock.advance(seconds: 9)
        #expect(cache.read("portal-token:file-key:x") == Secret("key"))
        clock.advance(seconds: 8)
        // 26 seconds after it was stored: past the maximum, however recently it was read.
        #expect(cache.read("portal-token:file-key:x") == nil)
        cache.store(Secret("key"), as: "idle", idleSeconds: 10, maximumSeconds: 100)
        clock.advance(seconds: 10)
        #expect(cache.read("idle") == nil)
    }

    @Test("drop and dropAll forget entries; a zero timeout keeps nothing")
    func dropping() {
        let cache = MemorySecretCache(now: Clock().now)
        cache.store(Secret("a"), as: "portal-token:session:a", forSeconds: 60)
        cache.store(Secret("b"), as: "portal-token:session:b", forSeconds: 60)
        cache.store(Secret("c"), as: "other", forSeconds: 60)
        cache.store(Secret("d"), as: "none", forSeconds: 0)
        cache.drop("other")
        #expect(cache.read("other") == nil)
        #expect(cache.read("none") == nil)
        cache.dropAll(withPrefix: "portal-token:")
        #expect(cache.read("portal-token:session:a") == nil && cache.read("portal-token:session:b") == nil)
    }
}
