import Foundation

/// Writes a script that tests hand to programs to run (an askpass, a hook), mode 0755.
///
/// The file is opened with O_CLOEXEC and closed before anyone runs it. Foundation's own writers
/// leave the descriptor inheritable: a process that another test spawns at that moment keeps a
/// writable copy open for its whole life, and every exec of the script then fails with ETXTBSY
/// ("Text file busy") until that process ends.
public func writeExecutableScript(_ text: String, to url: URL) throws {
    let descriptor = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
    guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    try handle.write(contentsOf: Data(text.utf8))
    try handle.close()
}
