import Glibc
import Synchronization

/// Turns SIGINT and SIGTERM into something a `poll` loop can see, while a listener waits.
///
/// The handler only does async-signal-safe work: it bumps a counter and writes a byte to a
/// process-wide self-pipe whose read end every waiting listener polls. A listener compares the
/// counter with the value it saw when it started, so one signal stops every listener that was
/// waiting, and a byte left over from an earlier signal stops none. The previous dispositions
/// come back when the last listener stops waiting, so Ctrl-C after sign-in behaves as usual.
enum InterruptRelay {
    static let signals: [Int32] = [SIGINT, SIGTERM]

    /// Bumped by the handler; read by listeners.
    static let generation = Atomic<Int>(0)
    static let lastSignal = Atomic<Int32>(0)

    private struct Installation {
        var users = 0
        var previous: [Int32: sigaction] = [:]
    }

    private static let installation = Mutex(Installation())

    /// The self-pipe, made once and kept for the life of the process (both ends close-on-exec
    /// and non-blocking). Read and written as plain integers from the handler.
    nonisolated(unsafe) private(set) static var readDescriptor: Int32 = -1
    nonisolated(unsafe) private static var writeDescriptor: Int32 = -1

    /// Starts relaying for one more listener; returns the generation to compare against.
    static func begin() -> Int {
        installation.withLock { state in
            if readDescriptor < 0 {
                var descriptors: [Int32] = [-1, -1]
                // pipe2 is a GNU extension Swift's Glibc module does not export.
                if pipe(&descriptors) == 0 {
                    for descriptor in descriptors {
                        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
                    }
                    readDescriptor = descriptors[0]
                    writeDescriptor = descriptors[1]
                }
            }
            if state.users == 0 {
                drain()
                _ = generation.load(ordering: .sequentiallyConsistent)
                _ = lastSignal.load(ordering: .relaxed)
                for signal in signals {
                    var action = sigaction()
                    action.__sigaction_handler.sa_handler = handle
                    sigemptyset(&action.sa_mask)
                    action.sa_flags = SA_RESTART
                    var previous = sigaction()
                    sigaction(signal, &action, &previous)
                    state.previous[signal] = previous
                }
            }
            state.users += 1
            return generation.load(ordering: .sequentiallyConsistent)
        }
    }

    /// Stops relaying for one listener; the last one puts the previous dispositions back.
    static func end() {
        installation.withLock { state in
            state.users -= 1
            guard state.users == 0 else { return }
            for signal in signals {
                if var previous = state.previous[signal] { sigaction(signal, &previous, nil) }
            }
            state.previous = [:]
        }
    }

    /// Whether a signal arrived since `started`, and which.
    static func signal(since started: Int) -> Int32? {
        generation.load(ordering: .sequentiallyConsistent) == started ? nil : lastSignal.load(ordering: .relaxed)
    }

    /// Empties the pipe (a byte from a signal some other listener already acted on).
    static func drain() {
        guard readDescriptor >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &buffer, buffer.count) > 0 {}
    }

    private static let handle: @convention(c) (Int32) -> Void = { signal in
        let savedErrno = errno
        lastSignal.store(signal, ordering: .relaxed)
        generation.wrappingAdd(1, ordering: .sequentiallyConsistent)
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
        errno = savedErrno
    }
}
