import Basics
import CTPM2
import Glibc
import PortalTokenCore
import Synchronization

/// The encrypted file's key sealed by a TPM 2.0 through tpm2-tss's ESAPI (docs/storage.md, "A key
/// sealed by the TPM"), as systemd and tpm2-tools use it:
///
/// - under a primary key of the owner hierarchy made from a fixed template (ECC P-256, AES-128-CFB,
///   no authorization value, as tpm2-tools' default), so nothing needs to be kept in the TPM;
/// - as a keyed-hash object holding the 32 bytes, fixed to this TPM and its parent, authorized by
///   an empty authorization value, or, with PCRs named, by a PolicyPCR over their current SHA-256
///   values and by nothing else;
/// - through sessions salted by the primary key that encrypt the key on its way to and from the
///   TPM, so it never crosses the bus in the clear;
/// - every handle flushed before it returns, so it works on a TPM with no resource manager
///   between (swtpm's socket); the kernel's `/dev/tpm0`, which one process at a time may hold,
///   is refused in favour of `/dev/tpmrm0`.
///
/// The TCTI is chosen as tpm2-tools choose it: `TPM2TOOLS_TCTI`, else `/dev/tpmrm0`.
public struct TPMKeySealer: KeySealer {
    public static let defaultTCTI = "device:/dev/tpmrm0"
    /// The bound on each answer of the TPM; a sealing or unsealing takes six commands.
    public static let defaultTimeoutMilliseconds: Int32 = 4000

    public let tcti: String
    let timeoutMilliseconds: Int32

    public init(tcti: String?, timeoutMilliseconds: Int32 = defaultTimeoutMilliseconds) {
        self.tcti = tcti.flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultTCTI
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    public func seal(_ key: Secret, pcrs: [Int]) throws(SealError) -> [UInt8] {
        try withTPM { (tpm) throws(SealError) -> [UInt8] in
            let primary = try tpm.createPrimary()
            defer { tpm.flush(primary) }
            var template = TPM2B_PUBLIC()
            template.publicArea.type = TPM2_ALG_KEYEDHASH
            template.publicArea.nameAlg = TPM2_ALG_SHA256
            template.publicArea.objectAttributes =
                TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | (pcrs.isEmpty ? TPMA_OBJECT_USERWITHAUTH : 0)
            template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL
            if !pcrs.isEmpty { template.publicArea.authPolicy = try tpm.policyDigest(pcrs) }
            var sensitive = TPM2B_SENSITIVE_CREATE()
            defer {
                withUnsafeMutableBytes(of: &sensitive) {
                    if let base = $0.baseAddress { explicit_bzero(base, $0.count) }
                }
            }
            key.withBytes { bytes in
                withUnsafeMutableBytes(of: &sensitive.sensitive.data.buffer) { buffer in
                    buffer.copyBytes(from: bytes.prefix(buffer.count))
                }
            }
            sensitive.sensitive.data.size = UInt16(min(key.byteCount, 128))
            let session = try tpm.parameterSession(primary, type: TPM2_SE(TPM2_SE_HMAC))
            defer { tpm.flush(session) }
            var privatePart: UnsafeMutablePointer<TPM2B_PRIVATE>?
            var publicPart: UnsafeMutablePointer<TPM2B_PUBLIC>?
            let created = portal_esys_create(
                tpm.library.create, tpm.context, primary, session, &sensitive, &template, &privatePart, &publicPart)
            try tpm.check(created, "sealing the key")
            defer {
                tpm.free(privatePart)
                tpm.free(publicPart)
            }
            guard let privatePart, let publicPart else { throw SealError(.refused, "the TPM sealed nothing") }
            var blob = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size + MemoryLayout<TPM2B_PRIVATE>.size)
            var offset = 0
            try tpm.check(
                portal_mu_public_marshal(tpm.library.marshalPublic, publicPart, &blob, blob.count, &offset),
                "encoding the sealed key")
            try tpm.check(
                portal_mu_private_marshal(tpm.library.marshalPrivate, privatePart, &blob, blob.count, &offset),
                "encoding the sealed key")
            return Array(blob[..<offset])
        }
    }

    public func unseal(_ sealed: [UInt8], pcrs: [Int]) throws(SealError) -> Secret {
        try withTPM { (tpm) throws(SealError) -> Secret in
            var publicPart = TPM2B_PUBLIC()
            var privatePart = TPM2B_PRIVATE()
            var offset = 0
            guard
                portal_mu_public_unmarshal(tpm.library.unmarshalPublic, sealed, sealed.count, &offset, &publicPart)
                    == 0,
                portal_mu_private_unmarshal(tpm.library.unmarshalPrivate, sealed, sealed.count, &offset, &privatePart)
                    == 0, offset == sealed.count
            else {
                throw SealError(.refused, "the sealed key in the store file is not a TPM object")
            }
            let primary = try tpm.createPrimary()
            defer { tpm.flush(primary) }
            var object = ESYS_TR(ESYS_TR_NONE)
            try tpm.check(
                portal_esys_load(tpm.library.load, tpm.context, primary, &privatePart, &publicPart, &object),
                "loading the sealed key")
            defer { tpm.flush(object) }
            let session = try tpm.parameterSession(primary, type: TPM2_SE(pcrs.isEmpty ? TPM2_SE_HMAC : TPM2_SE_POLICY))
            defer { tpm.flush(session) }
            var data: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
            if pcrs.isEmpty {
                try tpm.check(
                    portal_esys_unseal(
                        tpm.library.unseal, tpm.context, object, ESYS_TR(ESYS_TR_PASSWORD), session, &data),
                    "unsealing the key")
            } else {
                var selection = Self.selection(pcrs)
                try tpm.check(
                    portal_esys_policy_pcr(tpm.library.policyPCR, tpm.context, session, &selection), "checking the PCRs"
                )
                try tpm.check(
                    portal_esys_unseal(tpm.library.unseal, tpm.context, object, session, ESYS_TR(ESYS_TR_NONE), &data),
                    "unsealing the key")
            }
            guard let data else { throw SealError(.refused, "the TPM unsealed nothing") }
            defer {
                withUnsafeMutableBytes(of: &data.pointee) {
                    if let base = $0.baseAddress { explicit_bzero(base, $0.count) }
                }
                tpm.free(data)
            }
            let size = Int(data.pointee.size)
            return withUnsafeBytes(of: &data.pointee.buffer) { Secret(bytes: Array($0.prefix(size))) }
        }
    }

    /// The PCRs of the SHA-256 bank, as a selection.
    static func selection(_ pcrs: [Int]) -> TPML_PCR_SELECTION {
        var selection = TPML_PCR_SELECTION()
        selection.count = 1
        selection.pcrSelections.0.hash = TPM2_ALG_SHA256
        selection.pcrSelections.0.sizeofSelect = 3
        withUnsafeMutableBytes(of: &selection.pcrSelections.0.pcrSelect) { bits in
            for pcr in pcrs where (0..<24).contains(pcr) { bits[pcr / 8] |= UInt8(1 << (pcr % 8)) }
        }
        return selection
    }

    /// Runs `body` with a connection to the TPM, closed after it, on a thread of its own within
    /// the bound: a TCTI may block on a TPM that stopped answering (swtpm's waits on its control
    /// channel with no timeout), and the kernel's own bound on a command is minutes. Past the
    /// bound the thread is left to finish alone and nothing it returns is used.
    private func withTPM<T: Sendable>(_ body: @escaping (TPMConnection) throws(SealError) -> T) throws(SealError) -> T {
        if tcti == "device:/dev/tpm0" || tcti == "/dev/tpm0" || tcti.hasPrefix("device:/dev/tpm0:") {
            throw SealError(
                .unavailable,
                "\(tcti) is the TPM without the kernel's resource manager, which one process at a time may hold",
                hint: "use its resource manager: TPM2TOOLS_TCTI=device:/dev/tpmrm0 (the default)")
        }
        let library = try TPMLibrary.shared.get()
        let (tcti, timeout) = (self.tcti, timeoutMilliseconds)
        let work = { () -> Result<T, SealError> in
            do throws(SealError) {
                let connection = try TPMConnection(library: library, tcti: tcti, timeoutMilliseconds: timeout)
                defer { connection.close() }
                return .success(try body(connection))
            } catch {
                return .failure(error)
            }
        }
        let handoff = Handoff<Result<T, SealError>>()
        guard let handoff, DetachedThread.start({ handoff.finish(work()) }) else { return try work().get() }
        guard let result = handoff.wait(milliseconds: timeout) else {
            throw SealError(.timedOut, "the TPM at \(tcti) did not answer in time (\(timeout) ms)")
        }
        return try result.get()
    }
}

/// A value one thread hands another that waits for it at most a while, signalled through a
/// pipe; whichever of the two is last closes it, so neither writes to nor polls a closed one.
final class Handoff<Value: Sendable>: @unchecked Sendable {
    private let pipe: (read: Int32, write: Int32)
    private let state = Mutex<(value: Value?, abandoned: Bool)>((nil, false))

    init?() {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { return nil }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        pipe = (ends[0], ends[1])
    }

    private func closePipe() {
        close(pipe.read)
        close(pipe.write)
    }

    func finish(_ value: Value) {
        state.withLock { state in
            state.value = value
            if state.abandoned {
                closePipe()
            } else {
                var one: UInt8 = 1
                _ = write(pipe.write, &one, 1)
            }
        }
    }

    /// The value, or nil when it did not come within `milliseconds`.
    func wait(milliseconds: Int32) -> Value? {
        let deadline = MonotonicClock.nanoseconds() + Int64(milliseconds) * 1_000_000
        var descriptor = pollfd(fd: pipe.read, events: Int16(POLLIN), revents: 0)
        while case let left = (deadline - MonotonicClock.nanoseconds()) / 1_000_000, left > 0 {
            if poll(&descriptor, 1, Int32(left)) != -1 || errno != EINTR { break }
        }
        return state.withLock { state in
            guard let value = state.value else {
                state.abandoned = true
                return nil
            }
            closePipe()
            return value
        }
    }
}

/// One open ESAPI context on one TCTI.
final class TPMConnection {
    let library: TPMLibrary
    let tcti: String
    let context: OpaquePointer
    private var tctiContext: OpaquePointer?

    init(library: TPMLibrary, tcti: String, timeoutMilliseconds: Int32) throws(SealError) {
        self.library = library
        self.tcti = tcti
        var tctiContext: OpaquePointer?
        let loaded = portal_tctildr_initialize(library.tctiInitialize, tcti, &tctiContext)
        guard loaded == 0, let tctiContext else {
            throw SealError(
                .unavailable, "no TPM could be reached at \(tcti) (\(TPMConnection.describe(loaded)))",
                hint: "check that the TPM is there (ls /dev/tpmrm0), or set TPM2TOOLS_TCTI to the one to use")
        }
        var context: OpaquePointer?
        let opened = portal_esys_initialize(library.initialize, &context, tctiContext)
        guard opened == 0, let context else {
            var owned: OpaquePointer? = tctiContext
            portal_tctildr_finalize(library.tctiFinalize, &owned)
            throw SealError(.unavailable, "the TPM at \(tcti) did not open (\(TPMConnection.describe(opened)))")
        }
        self.context = context
        self.tctiContext = tctiContext
        _ = portal_esys_set_timeout(library.setTimeout, context, timeoutMilliseconds)
    }

    func close() {
        var context: OpaquePointer? = self.context
        portal_esys_finalize(library.finalize, &context)
        portal_tctildr_finalize(library.tctiFinalize, &tctiContext)
    }

    /// The primary key every sealed key hangs from: made again from its template each time.
    func createPrimary() throws(SealError) -> ESYS_TR {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = TPM2_ALG_ECC
        template.publicArea.nameAlg = TPM2_ALG_SHA256
        template.publicArea.objectAttributes =
            TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
            | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
        template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
        template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
        template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
        template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
        template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
        var handle = ESYS_TR(ESYS_TR_NONE)
        try check(
            portal_esys_create_primary(library.createPrimary, context, &template, &handle), "making its primary key")
        return handle
    }

    /// A session salted by `key` that encrypts the first parameter each way.
    func parameterSession(_ key: ESYS_TR, type: TPM2_SE) throws(SealError) -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_AES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPM2_ALG_CFB
        var session = ESYS_TR(ESYS_TR_NONE)
        try check(
            portal_esys_start_auth_session(library.startAuthSession, context, key, type, &symmetric, &session),
            "starting a session")
        let flags = TPMA_SESSION(TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION)
        guard portal_esys_trsess_set_attributes(library.setSessionAttributes, context, session, flags) == 0 else {
            flush(session)
            throw SealError(.refused, "the TPM's session could not be set to encrypt")
        }
        return session
    }

    /// The policy digest of a PolicyPCR over the PCRs' current values, from a trial session.
    func policyDigest(_ pcrs: [Int]) throws(SealError) -> TPM2B_DIGEST {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_NULL
        var trial = ESYS_TR(ESYS_TR_NONE)
        try check(
            portal_esys_start_auth_session(
                library.startAuthSession, context, ESYS_TR(ESYS_TR_NONE), TPM2_SE(TPM2_SE_TRIAL), &symmetric, &trial),
            "starting a trial session")
        defer { flush(trial) }
        var selection = TPMKeySealer.selection(pcrs)
        try check(portal_esys_policy_pcr(library.policyPCR, context, trial, &selection), "reading the PCRs")
        var digest: UnsafeMutablePointer<TPM2B_DIGEST>?
        try check(portal_esys_policy_get_digest(library.policyGetDigest, context, trial, &digest), "reading the policy")
        defer { free(digest) }
        guard let digest else { throw SealError(.refused, "the TPM gave no policy digest") }
        return digest.pointee
    }

    func flush(_ handle: ESYS_TR) {
        guard handle != ESYS_TR(ESYS_TR_NONE) else { return }
        _ = portal_esys_flush_context(library.flushContext, context, handle)
    }

    func free<T>(_ pointer: UnsafeMutablePointer<T>?) {
        guard let pointer else { return }
        portal_esys_free(library.free, pointer)
    }

    func check(_ code: TSS2_RC, _ doing: String) throws(SealError) {
        guard code != 0 else { return }
        throw TPMConnection.error(code, doing: doing, tcti: tcti)
    }

    /// What a return code means for the user: the TPM's own codes by what to do about them.
    static func error(_ code: TSS2_RC, doing: String, tcti: String) -> SealError {
        let layer = code >> 16
        let number = code & 0xFFFF
        // The TPM's format-one codes carry a handle, session or parameter number in bits 8–11.
        let tpmCode = number & 0x80 != 0 ? (number & 0xBF) : number
        let what = "\(doing) (\(describe(code)))"
        if layer == 0 {
            switch tpmCode {
            case 0x921:
                return SealError(
                    .refused, "the TPM is in dictionary-attack lockout while \(what)",
                    hint: "wait for the lockout to end, or clear it with tpm2_dictionarylockout --clear-lockout")
            case 0x99D, 0x9D, 0x8F:
                return SealError(
                    .refused, "the TPM refused the key's policy while \(what): a PCR it is bound to has changed")
            case 0x9F, 0x8B, 0x95, 0x9A, 0x8E:
                return SealError(
                    .refused, "the TPM refused the sealed key while \(what): it was sealed by another TPM")
            case 0x902, 0x903:
                return SealError(
                    .refused, "the TPM has no room left while \(what)",
                    hint: "use the kernel's resource manager (TPM2TOOLS_TCTI=device:/dev/tpmrm0), which frees it")
            case 0x908, 0x90A, 0x922:
                return SealError(.timedOut, "the TPM is busy while \(what)", hint: "try again")
            default:
                return SealError(.refused, "the TPM refused \(what)")
            }
        }
        if layer == 10, number == 9 {
            return SealError(.timedOut, "the TPM at \(tcti) did not answer in time while \(doing)")
        }
        return SealError(.unavailable, "the TPM at \(tcti) failed while \(what)")
    }

    static func describe(_ code: TSS2_RC) -> String {
        "TSS2_RC 0x" + String(code, radix: 16)
    }
}

/// tpm2-tss's libraries and the functions portal-token calls, resolved once.
final class TPMLibrary: @unchecked Sendable {
    let tctiInitialize, tctiFinalize, initialize, finalize, setTimeout: UnsafeMutableRawPointer
    let createPrimary, create, load, unseal, flushContext, startAuthSession: UnsafeMutableRawPointer
    let setSessionAttributes, policyPCR, policyGetDigest, free: UnsafeMutableRawPointer
    let marshalPublic, unmarshalPublic, marshalPrivate, unmarshalPrivate: UnsafeMutableRawPointer

    static let sonames = (esys: "libtss2-esys.so.0", mu: "libtss2-mu.so.0", loader: "libtss2-tctildr.so.0")

    private init(esys: DynamicLibrary, mu: DynamicLibrary, loader: DynamicLibrary) throws(DynamicLibrary.Missing) {
        tctiInitialize = try loader.function("Tss2_TctiLdr_Initialize")
        tctiFinalize = try loader.function("Tss2_TctiLdr_Finalize")
        initialize = try esys.function("Esys_Initialize")
        finalize = try esys.function("Esys_Finalize")
        setTimeout = try esys.function("Esys_SetTimeout")
        createPrimary = try esys.function("Esys_CreatePrimary")
        create = try esys.function("Esys_Create")
        load = try esys.function("Esys_Load")
        unseal = try esys.function("Esys_Unseal")
        flushContext = try esys.function("Esys_FlushContext")
        startAuthSession = try esys.function("Esys_StartAuthSession")
        setSessionAttributes = try esys.function("Esys_TRSess_SetAttributes")
        policyPCR = try esys.function("Esys_PolicyPCR")
        policyGetDigest = try esys.function("Esys_PolicyGetDigest")
        free = try esys.function("Esys_Free")
        marshalPublic = try mu.function("Tss2_MU_TPM2B_PUBLIC_Marshal")
        unmarshalPublic = try mu.function("Tss2_MU_TPM2B_PUBLIC_Unmarshal")
        marshalPrivate = try mu.function("Tss2_MU_TPM2B_PRIVATE_Marshal")
        unmarshalPrivate = try mu.function("Tss2_MU_TPM2B_PRIVATE_Unmarshal")
    }

    /// Loaded on first use. tpm2-tss logs to stderr, and at its debug levels would print what
    /// it sends: its log is turned off before it is loaded, whatever TSS2_LOG says.
    static let shared: Result<TPMLibrary, SealError> = {
        setenv("TSS2_LOG", "all+NONE", 1)
        guard let esys = DynamicLibrary(sonames.esys), let mu = DynamicLibrary(sonames.mu),
            let loader = DynamicLibrary(sonames.loader)
        else {
            return .failure(
                SealError(
                    .unavailable, "tpm2-tss could not be loaded (\(sonames.esys), \(sonames.mu), \(sonames.loader))",
                    hint:
                        "install Debian's libtss2-esys-3.0.2-0, libtss2-mu0, libtss2-tctildr0 and libtss2-tcti-device0"
                ))
        }
        do throws(DynamicLibrary.Missing) {
            return .success(try TPMLibrary(esys: esys, mu: mu, loader: loader))
        } catch {
            return .failure(SealError(.unavailable, "tpm2-tss lacks \(error.name)"))
        }
    }()
}
