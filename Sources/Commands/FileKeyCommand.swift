import Operations
import PortalTokenCore

struct FileKeyCommand: Command {
    static let name = "file-key"
    static let isRefusedInClientMode = true
    static let summary = "Re-key the encrypted file now: seal it to the TPM or not, or change its passphrase"
    static let details = """
        Writes the encrypted store file (store-file) again at once, by rename, with
        its key kept as the settings now say: sealed by the TPM or not (file-tpm), to
        the PCRs of file-tpm-pcrs, with or without the recovery passphrase
        (file-tpm-recovery). Without it a changed setting takes effect at the file's
        next write. The file must open first: by a cached key, the TPM, or its
        passphrase from its source. A sealed file is sealed afresh to the PCRs' values
        now, and the new seal is checked before the file is written. Passphrases are
        asked and keys made outside the store's lock; under it the file is written
        only if its key is still the one it was opened with.

        --new-passphrase also changes the passphrase: the file is keyed again under
        the new one, with a new salt, so the old one no longer opens it (copies made
        before still open with the old one). The new passphrase is typed twice at the
        terminal, or read from the file --new-passphrase-file names (as passphrase-file
        is read); point the passphrase's source at it afterwards. The old passphrase's
        key is dropped from the kernel keyring's cache. With file-tpm on and
        file-tpm-recovery = none the file has no passphrase to change: exit 4. A file
        keyed for the TPM alone that the settings now want a passphrase for gets one
        only from --new-passphrase: without it, exit 4.

        Prints on stderr what opens the file now, as status's fileKey says it. No store
        file: says so, exit 0. Any failure (a wrong passphrase, a TPM that does not
        answer, another process re-keying the file meanwhile) leaves the file as it
        was: exit 4. In client mode (PORTAL_TOKEN_AGENT_SOCK) it is refused naming the
        agent, exit 4.
        """

    let request: FileKey.Request

    init(arguments: ParsedArguments) throws(CLIError) {
        let file = arguments.value(.newPassphraseFile)
        request = FileKey.Request(
            changesPassphrase: arguments.has(.newPassphrase) || file != nil, newPassphraseFile: file)
    }

    func run(in context: Context) throws {
        switch try FileKey.run(request, context) {
        case .nothingStored(let path):
            context.streams.printError("portal-token: nothing to re-key: there is no store file at \(path)")
        case .rekeyed(let path, let protection, let newPassphrase):
            context.streams.printError(
                "portal-token: re-keyed the store file \(path)\(newPassphrase ? " under its new passphrase" : ""); "
                    + "file key: \(protection.description)")
        }
    }
}
