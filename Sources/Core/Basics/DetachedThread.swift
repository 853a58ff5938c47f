import Glibc

/// Detached threads with a chosen stack size, on pthreads: neither Foundation's `Thread` nor
/// libdispatch is linked into portal-token, and every run would pay for their start-up.
public enum DetachedThread {
    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Starts `body` on a new detached thread; false when the system refused one.
    @discardableResult
    public static func start(stackBytes: Int = 512 * 1024, _ body: @escaping () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, max(stackBytes, Int(PTHREAD_STACK_MIN)))
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, &attributes,
            { raw in
                let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
                body.run()
                return nil
            }, context)
        if result != 0 {
            Unmanaged<Body>.fromOpaque(context).release()
            return false
        }
        return true
    }
}
