import Glibc

/// The process environment, read without Foundation to keep start-up short.
public enum ProcessEnvironment {
    /// A snapshot of `environ`; an entry without `=` is left out. The name ends at the first `=`
    /// byte, as getenv(3) reads it. Every run reads it: the bytes are split before any String is
    /// made, and the dictionary is sized once.
    public static func current() -> [String: String] {
        var count = 0
        while environ[count] != nil { count += 1 }
        var result: [String: String] = [:]
        result.reserveCapacity(count)
        for index in 0..<count {
            guard let entry = environ[index], let equals = strchr(entry, Int32(UInt8(ascii: "="))) else { continue }
            let name = UnsafeRawBufferPointer(start: entry, count: equals - entry)
            result[String(decoding: name, as: UTF8.self)] = String(cString: equals + 1)
        }
        return result
    }
}
