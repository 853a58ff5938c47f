import Basics
import Glibc
import Testing

/// A fresh directory under /tmp, removed with its contents afterwards.
private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    var template = Array("/tmp/basics-test-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    let directory = String(cString: try #require(made))
    defer { system("rm -rf '\(directory)'") }
    try body(directory)
}

@Suite("Hex, percent-coding and trimming")
struct TextTests {
    @Test("writes lowercase hex, pads to a width, and reads either case")
    func hex() {
        #expect(Hex.encode([0x00, 0x0f, 0xab, 0xff]) == "000fabff")
        #expect(Hex.encode([0xab], uppercase: true) == "AB")
        #expect(Hex.encode(0x1f, width: 4) == "001f")
        #expect(Hex.value(of: UInt8(ascii: "F")) == 15)
        #expect(Hex.value(of: UInt8(ascii: "g")) == nil)
    }

    @Test("decodes strictly, leniently as git does, and encodes all but the unreserved")
    func percentCoding() {
        #expect(PercentCoding.decodeStrictly(Array("a%2Fb+c".utf8)[...]) == Array("a/b+c".utf8))
        #expect(PercentCoding.decodeStrictly(Array("a+c".utf8)[...], plusAsSpace: true) == Array("a c".utf8))
        #expect(PercentCoding.decodeStrictly(Array("100%".utf8)[...]) == nil)
        #expect(PercentCoding.decodeLeniently(Array("100%-%00-%41".utf8)[...]) == Array("100%-%00-A".utf8))
        #expect(
            PercentCoding.encode("a b/é", keeping: { $0 == UInt8(ascii: "a") || $0 == UInt8(ascii: "b") })
                == "a%20b%2F%C3%A9")
    }

    @Test("trims ASCII white space, or all Unicode white space")
    func trimming() {
        #expect(" \t key = v \r\n".trimmingWhitespace == "key = v")
        #expect("\u{00A0}x\u{2003}".trimmingWhitespace == "\u{00A0}x\u{2003}")
        #expect("\u{00A0}x\u{2003}\n".trimmingUnicodeWhitespace == "x")
        #expect("  ".trimmingWhitespace.isEmpty)
        #expect("".trimmingWhitespace.isEmpty)
        let line: Substring = "[ \u{301}é \r\n]".dropFirst().dropLast()
        #expect(line.trimmingWhitespace == "\u{301}é")
        #expect("\u{1F600}\n".trimmingWhitespace == "\u{1F600}")
    }
}

@Suite("Files, directories and locks")
struct FileTests {
    @Test("creates missing directories 0700 and leaves an existing one alone")
    func directories() throws {
        try withTemporaryDirectory { root in
            try Directories.createParent(of: root + "/a/b/file")
            var status = stat()
            #expect(stat(root + "/a/b", &status) == 0)
            #expect(status.st_mode & 0o777 == 0o700)
            chmod(root + "/a", 0o750)
            try Directories.create(root + "/a")
            #expect(stat(root + "/a", &status) == 0)
            #expect(status.st_mode & 0o777 == 0o750)
            #expect(throws: SystemCallError.self) { try Directories.create("/proc/1/no-such/child") }
        }
    }

    @Test("reads a file within its bound, and refuses a larger one, a FIFO and a missing one")
    func reading() throws {
        try withTemporaryDirectory { root in
            let path = root + "/file"
            let descriptor = open(path, O_WRONLY | O_CREAT, 0o600)
            _ = "hello".withCString { write(descriptor, $0, 5) }
            close(descriptor)
            let contents = try FileReading.contents(of: path)
            #expect(contents == Array("hello".utf8))
            #expect(throws: FileReading.Failure.tooLarge) { try FileReading.contents(of: path, limit: 4) }
            #expect(throws: FileReading.Failure.missing) { try FileReading.contents(of: root + "/none") }
            mkfifo(root + "/fifo", 0o600)
            #expect(throws: FileReading.Failure.notRegular) { try FileReading.contents(of: root + "/fifo") }
        }
    }

    @Test("a held lock makes another wait until its deadline, then time out; released, it is free")
    func lockDeadline() throws {
        try withTemporaryDirectory { root in
            let path = root + "/test.lock"
            let first = try FileLock.acquire(path, timeoutMilliseconds: 100)
            let started = MonotonicClock.milliseconds()
            #expect(throws: FileLock.Failure.timedOut) { try FileLock.acquire(path, timeoutMilliseconds: 200) }
            let waited = MonotonicClock.milliseconds() - started
            #expect(waited >= 200 && waited < 2000)
            first.release()
            _ = try FileLock.acquire(path, timeoutMilliseconds: 0)
        }
    }

    @Test("refuses a symbolic link at the lock's name")
    func lockSymlink() throws {
        try withTemporaryDirectory { root in
            symlink(root + "/elsewhere", root + "/test.lock")
            #expect(throws: FileLock.Failure.symbolicLink) {
                try FileLock.acquire(root + "/test.lock", timeoutMilliseconds: 10)
            }
            #expect(access(root + "/elsewhere", F_OK) != 0)
        }
    }
}

@Suite("Environment")
struct EnvironmentTests {
    @Test("snapshots the process environment")
    func snapshot() {
        setenv("BASICS_TEST_VALUE", "a=b", 1)
        #expect(ProcessEnvironment.current()["BASICS_TEST_VALUE"] == "a=b")
    }

    @Test("a name ends at the first '=' byte, as getenv reads it, even before a combining mark")
    func nameEndsAtFirstEquals() {
        // "=" followed by U+0301 is one Character: split by Character, the name ran on to the next "=".
        setenv("BASICS_TEST_COMBINING", "\u{301}x=y", 1)
        let environment = ProcessEnvironment.current()
        #expect(environment["BASICS_TEST_COMBINING"] == "\u{301}x=y")
        #expect(environment["BASICS_TEST_COMBINING=\u{301}x"] == nil)
        #expect(environment["BASICS_TEST_COMBINING"] == String(cString: getenv("BASICS_TEST_COMBINING")))
    }
}
