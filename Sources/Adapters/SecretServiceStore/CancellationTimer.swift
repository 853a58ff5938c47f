import Basics
import CLibSecret
import Glibc
import Synchronization

/// Cancels a GCancellable when a bound passes, from a small thread of its own.
///
/// libsecret's `*_sync` calls run their own main context, so a GLib timeout cannot reach them;
/// a plain thread waiting on the monotonic clock can, since cancelling a GCancellable is
/// thread-safe. A raw pthread keeps libdispatch, its constructor and its worker threads out of
/// every invocation. The timer is handed libsecret's functions already resolved, so its thread
/// never loads or looks up anything. It sleeps in poll(2) on a pipe that `stop` writes to.
final class CancellationTimer {
    /// Whether `stop` has begun; the cancel happens under the same lock, so none comes after.
    private let stopped = Mutex(false)
    /// The pipe's read and write ends.
    private let wakeup: Int32
    private let wake: Int32
    private var thread = pthread_t()
    private var started = false
    private let cancellable: OpaquePointer
    private let lib: LibSecret.Functions
    private let deadline: Int64

    init(
        cancelling cancellable: OpaquePointer, afterMilliseconds milliseconds: Int,
        using lib: LibSecret.Functions
    ) {
        self.cancellable = cancellable
        self.lib = lib
        deadline = MonotonicClock.milliseconds() + Int64(milliseconds)
        var ends: [Int32] = [-1, -1]
        let piped = pipe(&ends) == 0
        if piped { for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) } }
        wakeup = piped ? ends[0] : -1
        wake = piped ? ends[1] : -1

        var threadAttributes = pthread_attr_t()
        pthread_attr_init(&threadAttributes)
        pthread_attr_setstacksize(&threadAttributes, 64 * 1024)
        let context = Unmanaged.passRetained(self).toOpaque()
        started =
            wakeup >= 0
            && pthread_create(
                &thread, &threadAttributes,
                { context in
                    let timer = Unmanaged<CancellationTimer>.fromOpaque(context!).takeRetainedValue()
                    timer.waitForDeadline()
                    return nil
                }, context) == 0
        if !started { Unmanaged<CancellationTimer>.fromOpaque(context).release() }
        pthread_attr_destroy(&threadAttributes)
    }

    private func waitForDeadline() {
        while true {
            let remaining = deadline - MonotonicClock.milliseconds()
            if remaining <= 0 {
                stopped.withLock { stopped in
                    if !stopped { lib.cancellableCancel(cancellable) }
                }
                return
            }
            var descriptor = pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0)
            // Woken by `stop`; a timeout or EINTR goes round again to check the clock.
            if poll(&descriptor, 1, Int32(clamping: remaining)) > 0 { return }
        }
    }

    /// Stops the timer and waits for its thread, so the cancellable outlives every use of it.
    func stop() {
        stopped.withLock { $0 = true }
        var byte: UInt8 = 1
        _ = write(wake, &byte, 1)
        if started { pthread_join(thread, nil) }
    }

    deinit {
        if wakeup >= 0 {
            close(wakeup)
            close(wake)
        }
    }
}
