import Glibc

/// The one way portal-token starts another program (the hook, git, a browser, `exec --proxy`'s
/// command): posix_spawn with an empty signal mask, every signal reset to its default (SIGPIPE
/// above all; glibc refuses to reset the few it reserves, which is fine), the caller's core-file
/// limits rather than the 0 portal-token runs with (docs/security.md, "Hardening rules"), and an
/// environment whose copy is wiped once the child has it.
public enum ChildProcess {
    /// Why a program did not start: the error number posix_spawn gave.
    public struct Failure: Error {
        public let number: Int32
    }

    /// What one of the child's standard descriptors is.
    public enum Stream {
        /// /dev/null, opened for reading (stdin) or writing.
        case null
        /// A copy of this process's descriptor.
        case descriptor(Int32)
    }

    /// Starts `program` with `arguments`; its pid, or the error number. `searchPath` finds a
    /// bare name on PATH; `environment` nil passes this process's own. `streams` maps 0, 1 and 2
    /// to what the child gets (one left out is inherited). `ownProcessGroup` puts it in a group
    /// of its own, so a terminal's Ctrl-C and a group kill reach only it and its descendants;
    /// `closesInherited` closes every descriptor from 3 up in the child.
    public static func spawn(
        _ program: String, _ arguments: [String], searchPath: Bool, environment: [String: String]? = nil,
        streams: [Int32: Stream] = [:], ownProcessGroup: Bool, closesInherited: Bool = false
    ) -> Result<pid_t, Failure> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, stream) in streams.sorted(by: { $0.key < $1.key }) {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(
                    &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, descriptor)
            }
        }
        if closesInherited { closeInheritedDescriptors(&actions) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in Int32(1)...64 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaultSignals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] =
            environment.map { values in values.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } }
            ?? []
        defer {
            for pointer in argv { free(pointer) }
            // A variable may hold a credential (the proxy's): its copy does not outlive the spawn.
            for pointer in envp {
                if let pointer { explicit_bzero(pointer, strlen(pointer)) }
                free(pointer)
            }
        }
        guard !argv.dropLast().contains(where: { $0 == nil }), !envp.contains(where: { $0 == nil }) else {
            return .failure(Failure(number: ENOMEM))
        }
        envp.append(nil)
        var pid: pid_t = 0
        var failure: Int32 = 0
        let spawn = searchPath ? posix_spawnp : posix_spawn
        CoreFileLimit.withCallerLimits {
            failure =
                environment == nil
                ? spawn(&pid, program, &actions, &attributes, &argv, environ)
                : spawn(&pid, program, &actions, &attributes, &argv, &envp)
        }
        return failure == 0 ? .success(pid) : .failure(Failure(number: failure))
    }

    /// Adds "close every descriptor from 3 up": glibc's `posix_spawn_file_actions_addclosefrom_np`
    /// (2.34 and later) when present, which Swift's Glibc module does not declare, so it is found
    /// by name; else one close per descriptor listed in /proc/self/fd (glibc ignores a close of a
    /// descriptor that is gone by then).
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        if let symbol = try? DynamicLibrary.process?.function("posix_spawn_file_actions_addclosefrom_np"),
            unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3) == 0
        {
            return
        }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let descriptor = Int32(name), descriptor > 2, descriptor != own {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }
    }
}
