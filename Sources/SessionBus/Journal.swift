import Glibc

/// The systemd journal, through libsystemd's `sd_journal_sendv` (sd_journal_print(3)): loaded
/// with dlopen only when a caller asks for it (the audit log's copy, off by default), never on
/// the everyday paths. `sd_journal_sendv` takes an array of `iovec`, so no variadic call is needed.
public enum Journal {
    private typealias SendV = @convention(c) (UnsafePointer<iovec>?, Int32) -> Int32

    private static let sendv: SendV? = {
        guard let library = dlopen(SDBus.soname, RTLD_LAZY | RTLD_LOCAL),
            let symbol = dlsym(library, "sd_journal_sendv")
        else { return nil }
        return unsafeBitCast(symbol, to: SendV.self)
    }()

    /// Sends one entry whose fields are `NAME=value` texts; false when libsystemd is missing or
    /// the journal refused it. A value must hold no newline (none of the callers' does).
    @discardableResult
    public static func send(_ fields: [String]) -> Bool {
        guard let sendv else { return false }
        // One buffer holds every field; each iovec points into it.
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = bytes.count
            bytes.append(contentsOf: field.utf8)
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeMutableBytes { buffer in
            let vectors = ranges.map { range in
                iovec(iov_base: buffer.baseAddress.map { $0 + range.lowerBound }, iov_len: range.count)
            }
            return sendv(vectors, Int32(vectors.count)) >= 0
        }
    }
}
