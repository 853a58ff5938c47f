import Basics
import CQRencode
import Glibc
import PortalTokenCore

/// The modules of a QR code, quiet zone included. It encodes a secret (a `totpLink`), so no
/// rendering of it shows the modules.
public struct QRMatrix: Sendable, CustomStringConvertible, CustomReflectable {
    /// Modules per side, quiet zone included.
    public let size: Int
    /// Modules per side of the symbol itself (21 for version 1, 4 more per version).
    public let symbolSize: Int
    public let quietZone: Int
    private let dark: [Bool]

    init(symbolSize: Int, quietZone: Int, symbol: (Int, Int) -> Bool) {
        self.symbolSize = symbolSize
        self.quietZone = quietZone
        size = symbolSize + 2 * quietZone
        var modules = [Bool](repeating: false, count: size * size)
        for row in 0..<symbolSize {
            for column in 0..<symbolSize where symbol(row, column) {
                modules[(row + quietZone) * size + column + quietZone] = true
            }
        }
        dark = modules
    }

    /// Whether the module at `row`, `column` is dark; outside the matrix is light.
    public func isDark(row: Int, column: Int) -> Bool {
        guard row >= 0, row < size, column >= 0, column < size else { return false }
        return dark[row * size + column]
    }

    public var description: String { "QRMatrix(size: \(size), modules: <redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: ["size": size], displayStyle: .struct) }
}

/// Why no QR code could be made. Never repeats the text.
public enum QRCodeError: Error, Sendable, Equatable {
    /// libqrencode is not installed; the caller shows the secret without the code.
    case libraryUnavailable
    case encodingFailed(errorNumber: Int32)

    public var message: String {
        switch self {
        case .libraryUnavailable:
            return "the QR code could not be drawn: \(LibQRencode.soname) could not be loaded"
        case .encodingFailed(let number):
            return number == ERANGE
                ? "the QR code could not be drawn: the text is too long"
                : "the QR code could not be drawn (errno \(number))"
        }
    }

    public var hint: String? {
        self == .libraryUnavailable
            ? "install Debian's libqrencode4 to see the code; the secret below works without it" : nil
    }
}

/// libqrencode, loaded with dlopen the first time a code is drawn (see CQRencode's shim.h for
/// why it is not linked). nil when the library or a function is missing.
enum LibQRencode {
    static let soname = "libqrencode.so.4"

    /// Addresses in a library that is never unloaded: safe to share between threads.
    struct Functions: @unchecked Sendable {
        let encodeData: UnsafeMutableRawPointer
        let free: UnsafeMutableRawPointer
    }

    static let loaded: Functions? = {
        guard let library = DynamicLibrary(soname), let encodeData = try? library.function("QRcode_encodeData"),
            let free = try? library.function("QRcode_free")
        else { return nil }
        return Functions(encodeData: encodeData, free: free)
    }()
}

/// Draws QR codes on a terminal (docs/portal-api.md, "Two-factor codes and enrollment": error correction level M and a
/// 4-module quiet zone), for the two-factor enrollment link.
///
/// Each line of text carries two rows of modules with the Unicode half blocks `▀ ▄ █` and a
/// space, so the code is square in a usual terminal font and half as tall as one character a
/// module. Scanners need dark modules on a light ground; a terminal may be dark or light, so
/// the default style sets both colours explicitly (black on white) instead of trusting the
/// terminal's own.
public enum TerminalQRCode {
    public static let quietZone = 4

    public enum Style: Sendable {
        /// Black modules on white, whatever the terminal's colours: ANSI SGR 30 (black text) on
        /// 47 (white), upgraded to 107 (bright white) where the terminal knows it. Each line
        /// ends with a reset, so a wrapped line never paints past the code.
        case ansi
        /// No escape sequences; the glyphs draw the dark modules. For a light background.
        case darkOnLight
        /// No escape sequences; the glyphs draw the light modules. For a dark background.
        case lightOnDark
    }

    /// The QR code for `text` (its bytes, in 8-bit mode), level M, smallest version that fits.
    public static func matrix(encoding text: Secret) throws(QRCodeError) -> QRMatrix {
        guard let library = LibQRencode.loaded else { throw .libraryUnavailable }
        let code: UnsafeMutablePointer<QRcode>? = text.withBytes { bytes in
            var empty: UInt8 = 0
            return withUnsafePointer(to: &empty) { emptyPointer in
                let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyPointer
                return portal_qrcode_encode_data(library.encodeData, Int32(bytes.count), base, 0, QR_ECLEVEL_M)
            }
        }
        guard let code else { throw .encodingFailed(errorNumber: errno) }
        defer {
            // The modules spell the secret; wipe them before libqrencode frees them.
            let width = Int(code.pointee.width)
            if let data = code.pointee.data { explicit_bzero(data, width * width) }
            portal_qrcode_free(library.free, code)
        }
        let width = Int(code.pointee.width)
        let data = code.pointee.data!
        // Bit 0 of each byte is the module's colour (1 = dark); the other bits describe its role.
        return QRMatrix(symbolSize: width, quietZone: quietZone) { row, column in
            data[row * width + column] & 1 == 1
        }
    }

    /// The code for `text`, drawn for a terminal. The drawing encodes the secret, so it is one.
    public static func render(_ text: Secret, style: Style = .ansi) throws(QRCodeError) -> Secret {
        render(try matrix(encoding: text), style: style)
    }

    /// `matrix` drawn as lines of half blocks, each ending in a line feed. Past the last row the
    /// ground is light (the quiet zone grows by half a module).
    public static func render(_ matrix: QRMatrix, style: Style = .ansi) -> Secret {
        var output: [UInt8] = []
        let linePrefix: [UInt8] = style == .ansi ? Array("\u{1B}[30;47;107m".utf8) : []
        let lineSuffix: [UInt8] = style == .ansi ? Array("\u{1B}[0m\n".utf8) : Array("\n".utf8)
        let upper = Array("▀".utf8), lower = Array("▄".utf8), full = Array("█".utf8), blank = Array(" ".utf8)
        for top in stride(from: 0, to: matrix.size, by: 2) {
            output += linePrefix
            for column in 0..<matrix.size {
                var topDrawn = matrix.isDark(row: top, column: column)
                var bottomDrawn = matrix.isDark(row: top + 1, column: column)
                if style == .lightOnDark {
                    topDrawn.toggle()
                    bottomDrawn.toggle()
                    if top + 1 >= matrix.size { bottomDrawn = true }
                }
                switch (topDrawn, bottomDrawn) {
                case (true, true): output += full
                case (true, false): output += upper
                case (false, true): output += lower
                case (false, false): output += blank
                }
            }
            output += lineSuffix
        }
        defer { zeroize(&output) }
        return Secret(bytes: output)
    }
}
