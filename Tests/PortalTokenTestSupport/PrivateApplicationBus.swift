import CSDBus
import Foundation
import Glibc

/// A D-Bus session bus of the test's own (`dbus-daemon` with a private configuration) whose only
/// service directory holds what the test puts there, so D-Bus activation can be exercised
/// without touching the session bus other tests share. Services it starts inherit its
/// environment, which is `environment`. Its type is not "session", so those services keep the
/// DBUS_SESSION_BUS_ADDRESS of `environment` (the keyring's bus) and find this one through
/// DBUS_STARTER_ADDRESS, as an activated service is meant to.
public final class PrivateApplicationBus: @unchecked Sendable {
    public let directory: URL
    public let address: String
    private let daemon: RunningProcess

    public init(environment: [String: String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-bus-\(UUID().uuidString)")
        let services = directory.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
        address = "unix:path=" + socket
        let configuration = directory.appendingPathComponent("bus.conf")
        try Self.configuration(
            type: "portal-token-test", listen: address, extra: "<servicedir>\(services.path)</servicedir>"
        )
        .write(to: configuration, atomically: false, encoding: .utf8)
        daemon = try RunningProcess(
            "/usr/bin/dbus-daemon", ["--config-file=" + configuration.path, "--nofork", "--nopidfile"],
            environment: environment)
        // Until a connection is accepted: the socket's file appears at bind, before listen, and a
        // client between the two is refused.
        let deadline = ProcessRunner.monotonicSeconds() + 10
        while !Self.accepts(socket) {
            guard ProcessRunner.monotonicSeconds() < deadline else {
                throw ProcessTimeout(command: "dbus-daemon did not listen: \(daemon.stderr)", seconds: 10)
            }
            usleep(10_000)
        }
    }

    /// Whether a connection to the Unix socket at `path` is accepted.
    static func accepts(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    /// A dbus-daemon configuration that lets every client own and call anything: test buses
    /// have one user and no policy to enforce.
    static func configuration(type: String, listen: String, extra: String = "") -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>\(type)</type>
          <listen>\(listen)</listen>
          \(extra)
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
    }

    deinit {
        daemon.signal(SIGTERM)
        _ = try? daemon.finish(timeout: 10)
        try? FileManager.default.removeItem(at: directory)
    }

    /// What the daemon and the services it started wrote to stderr.
    public var stderr: String { daemon.stderr }

    /// Installs a D-Bus service file (`NAME.service`) the bus activates on the first call.
    public func installService(named name: String, contents: String) throws {
        try contents.write(
            to: directory.appendingPathComponent("services/\(name).service"), atomically: false, encoding: .utf8)
    }

    public struct CallError: Error, Equatable, CustomStringConvertible {
        public let name: String
        public let message: String
        public var description: String { "\(name): \(message)" }
    }

    /// `org.freedesktop.Application.Open(uris, {})` on `destination`, as a desktop launcher
    /// (GIO's `g_app_info_launch_uris`) sends it for a D-Bus-activatable entry: the URIs travel in
    /// the message, in no process's arguments. Returns the error reply, nil on success.
    public func open(_ uris: [String], destination: String, path: String, timeoutSeconds: UInt64 = 60) throws
        -> CallError?
    {
        var bus: OpaquePointer?
        try check(sd_bus_new(&bus), "sd_bus_new")
        defer { sd_bus_flush_close_unref(bus) }
        try check(sd_bus_set_address(bus, address), "sd_bus_set_address")
        try check(sd_bus_set_bus_client(bus, 1), "sd_bus_set_bus_client")
        try check(sd_bus_start(bus), "sd_bus_start")
        var message: OpaquePointer?
        try check(
            sd_bus_message_new_method_call(bus, &message, destination, path, "org.freedesktop.Application", "Open"),
            "new method call")
        defer { sd_bus_message_unref(message) }
        var strings = uris.map { strdup($0) } + [nil]
        defer { strings.forEach { free($0) } }
        try check(
            strings.withUnsafeMutableBufferPointer { sd_bus_message_append_strv(message, $0.baseAddress) },
            "append uris")
        try check(sd_bus_message_open_container(message, CChar(UInt8(ascii: "a")), "{sv}"), "open platform data")
        try check(sd_bus_message_close_container(message), "close platform data")
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let called = sd_bus_call(bus, message, timeoutSeconds * 1_000_000, &error, &reply)
        sd_bus_message_unref(reply)
        if called >= 0 { return nil }
        return CallError(
            name: error.name.map { String(cString: $0) } ?? "errno \(-called)",
            message: error.message.map { String(cString: $0) } ?? String(cString: strerror(-called)))
    }

    private func check(_ result: Int32, _ step: String) throws {
        if result < 0 { throw SpawnFailure(executable: "sd-bus: \(step)", code: -result) }
    }
}

/// Reads every process's command line, over and over, until stopped: whatever any argv held
/// while it ran, it saw (within a sampling round of a fraction of a millisecond).
public final class CommandLineSampler: @unchecked Sendable {
    private let lock = NSLock()
    private var running = true
    private var seen: [String] = []
    private var rounds = 0
    private var matching = Sightings()
    private let thread: Thread

    /// The rounds in which some command line held what the sampler watches for, and when
    /// (ProcessRunner.monotonicSeconds) the first and the last of them ended.
    public struct Sightings: Sendable, CustomStringConvertible {
        public var rounds = 0
        public var first: Double?
        public var last: Double?
        /// From the first round that saw it to the last, in milliseconds.
        public var spanMilliseconds: Double { first.flatMap { first in last.map { ($0 - first) * 1000 } } ?? 0 }
        public var description: String {
            "seen in \(rounds) rounds over \(String(format: "%.1f", spanMilliseconds)) ms"
        }
    }

    /// Samples, keeping each distinct command line that holds any of `interesting`.
    public init(watchingFor interesting: [String]) {
        let box = Box()
        thread = Thread { box.sampler?.loop(interesting) }
        box.sampler = self
        thread.start()
    }

    private final class Box: @unchecked Sendable { weak var sampler: CommandLineSampler? }

    private func loop(_ interesting: [String]) {
        while true {
            lock.lock()
            let keepGoing = running
            lock.unlock()
            guard keepGoing else { return }
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            var found: [String] = []
            for entry in entries where entry.first?.isNumber == true {
                let descriptor = Glibc.open("/proc/\(entry)/cmdline", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 65536)
                let count = read(descriptor, &buffer, buffer.count)
                close(descriptor)
                guard count > 0 else { continue }
                let text = String(decoding: buffer[0..<count].map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
                if interesting.contains(where: text.contains) { found.append(text) }
            }
            let now = ProcessRunner.monotonicSeconds()
            lock.lock()
            for text in found where !seen.contains(text) { seen.append(text) }
            rounds += 1
            if !found.isEmpty {
                matching.rounds += 1
                if matching.first == nil { matching.first = now }
                matching.last = now
            }
            lock.unlock()
        }
    }

    /// The rounds that saw a watched command line so far.
    public var sightings: Sightings {
        lock.lock()
        defer { lock.unlock() }
        return matching
    }

    /// The command lines seen so far, while sampling goes on.
    public var commandLinesSoFar: [String] {
        lock.lock()
        defer { lock.unlock() }
        return seen
    }

    /// Stops sampling and returns the command lines seen and how many rounds were taken. With
    /// `minimumRounds`, first lets the sampler finish that many rounds (within `timeout`
    /// seconds): a loaded machine walks /proc slowly, and a check of the round count must not
    /// depend on the load.
    public func stop(minimumRounds: Int = 0, timeout: Double = 10) -> (commandLines: [String], rounds: Int) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            lock.lock()
            let done = rounds >= minimumRounds
            lock.unlock()
            if done { break }
            usleep(5000)
        }
        lock.lock()
        running = false
        lock.unlock()
        while !thread.isFinished { usleep(1000) }
        lock.lock()
        defer { lock.unlock() }
        return (seen, rounds)
    }
}
