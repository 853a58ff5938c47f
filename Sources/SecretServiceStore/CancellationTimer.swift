import CLibSecret
import Glibc

/// Cancels a GCancellable when a bound passes, from a small thread of its own.
///
/// libsecret's `*_sync` calls run their own main context, so a GLib timeout cannot reach them;
/// a plain thread waiting on the monotonic clock can, since cancelling a GCancellable is
/// thread-safe. A raw pthread keeps libdispatch, its constructor and its worker threads out of
/// every invocation. The timer is handed libsecret's functions already resolved, so its thread
/// never loads or looks up anything.
final class CancellationTimer {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var stopped = false
    private var thread = pthread_t()
    private var started = false
    private let cancellable: UnsafeMutablePointer<GCancellable>
    private let lib: LibSecret.Functions
    private let deadline: timespec

    init(cancelling cancellable: UnsafeMutablePointer<GCancellable>, afterMilliseconds milliseconds: Int,
         using lib: LibSecret.Functions) {
        self.cancellable = cancellable
        self.lib = lib
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = Int(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        deadline = timespec(tv_sec: now.tv_sec + milliseconds / 1000 + nanoseconds / 1_000_000_000,
                            tv_nsec: nanoseconds % 1_000_000_000)
        pthread_mutex_init(&mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(&condition, &attributes)
        pthread_condattr_destroy(&attributes)

        var threadAttributes = pthread_attr_t()
        pthread_attr_init(&threadAttributes)
        pthread_attr_setstacksize(&threadAttributes, 64 * 1024)
        let context = Unmanaged.passRetained(self).toOpaque()
        started = pthread_create(&thread, &threadAttributes, { context in
            let timer = Unmanaged<CancellationTimer>.fromOpaque(context!).takeRetainedValue()
            timer.waitForDeadline()
            return nil
        }, context) == 0
        if !started { Unmanaged<CancellationTimer>.fromOpaque(context).release() }
        pthread_attr_destroy(&threadAttributes)
    }

    private func waitForDeadline() {
        pthread_mutex_lock(&mutex)
        var deadline = self.deadline
        while !stopped {
            if pthread_cond_timedwait(&condition, &mutex, &deadline) == ETIMEDOUT {
                if !stopped { lib.cancellableCancel(cancellable) }
                break
            }
        }
        pthread_mutex_unlock(&mutex)
    }

    /// Stops the timer and waits for its thread, so the cancellable outlives every use of it.
    func stop() {
        pthread_mutex_lock(&mutex)
        stopped = true
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
        if started { pthread_join(thread, nil) }
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }
}
