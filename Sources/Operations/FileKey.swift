import PortalTokenCore

/// `file-key`: the encrypted store file written again now with its key as the settings ask
/// (sealed by the TPM or not, to which PCRs, with or without a recovery passphrase), and under a
/// new passphrase when asked (docs/storage.md, "Re-keying the file").
package enum FileKey {
    package struct Request {
        /// Whether the file gets a new passphrase.
        package var changesPassphrase: Bool
        /// Where the new passphrase is read from; nil: typed twice at the terminal.
        package var newPassphraseFile: String?

        package init(changesPassphrase: Bool, newPassphraseFile: String?) {
            (self.changesPassphrase, self.newPassphraseFile) = (changesPassphrase, newPassphraseFile)
        }
    }

    package enum Outcome {
        case nothingStored(path: String)
        case rekeyed(path: String, FileKeyProtection, newPassphrase: Bool)
    }

    package static func run(_ request: Request, _ context: Context) throws -> Outcome {
        let options = try context.fileStoreOptions()
        let source = context.passphraseSource(storePath: options.path)
        let file = request.newPassphraseFile
        // Asked only once the file is open, and outside the store lock (docs/storage.md, "Re-keying the file").
        let newPassphrase: (() throws(StoreError) -> Passphrase)? =
            request.changesPassphrase ? { () throws(StoreError) in try source.newPassphrase(file: file) } : nil
        guard let protection = try context.services.rekeyFile(options, newPassphrase) else {
            return .nothingStored(path: options.path)
        }
        return .rekeyed(path: options.path, protection, newPassphrase: request.changesPassphrase)
    }
}
